// atomic_file.cpp: write-to-temporary-then-rename, and the cleanup of temporaries
// whose writer was killed.
#include "solver/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace memopt::solver {
namespace {

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Note [Stale temporaries]: SIGKILL (or the OOM killer, or a power cut) stops a
// writer between creating its temporary and renaming it. The target is intact -- that
// is the point -- but "<name>.tmp.<pid>" stays. The next writer of the same path
// removes every such file whose pid no longer runs; a live pid may be another memopt
// writing the same file right now, and its temporary is not ours to touch.
void remove_stale_temporaries(const std::string& path) {
  const std::string prefix = base_of(path) + ".tmp.";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir_of(path), ec);
  if (ec) return;  // the open below reports a missing directory with its fix
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view digits = std::string_view(name).substr(prefix.size());
    pid_t pid = 0;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (err != std::errc() || end != digits.data() + digits.size() || pid <= 0) continue;
    if (pid == ::getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw std::runtime_error(path + ": cannot create " + tmp + " (" + std::strerror(errno) +
                             "); check that the directory exists and is writable");
  const auto fail = [&](const std::string& step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": " + step + " failed (" + std::strerror(err) + "); " + path +
                             " is unchanged; check free space and permissions");
  };
  for (const std::string_view part : parts) {
    for (size_t done = 0; done < part.size();) {
      const ssize_t n = ::write(fd, part.data() + done, part.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("writing " + tmp);
      done += static_cast<size_t>(n);
    }
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an
  // empty file, which is exactly the half-written state this function exists to avoid.
  if (::fsync(fd) != 0) fail("fsync of " + tmp);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("closing " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming " + tmp + " to " + path);
  // Make the rename itself durable. Best effort: some file systems refuse to fsync a
  // directory, and the file is already complete under its final name.
  if (const int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void append_line_atomic(const std::string& path, std::string_view line) {
  std::string text;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error(path + ": cannot read it to append (" + std::strerror(err) + ")");
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
  } else if (errno != ENOENT) {
    throw std::runtime_error(path + ": cannot open it to append (" + std::strerror(errno) + "); check permissions");
  }
  if (!text.empty() && text.back() != '\n') text += '\n';  // a line written by hand without its newline
  write_file_atomic(path, {text, line, "\n"});
}

}  // namespace memopt::solver
