// read_file.cpp: open, refuse a directory, read to the end.
#include "solver/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace memopt::solver {

std::string read_file_text(const std::string& path, const std::string& fix) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError(path + ": cannot open the file (" + std::strerror(errno) + "); " + fix);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw FormatError(path + ": is a directory, not a file; " + fix);
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw FormatError(path + ": cannot read the file (" + std::strerror(err) + "); " + fix);
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace memopt::solver
