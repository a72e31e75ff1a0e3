// atomic_file_test.cpp: an interrupted write leaves the old file, never half of one.
// The interruptions are real: a child process writes under a file-size
// limit, so the kernel fails its write() midway (EFBIG) or kills it there (SIGXFSZ).
#include "solver/io/atomic_file.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace memopt::solver {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memopt_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "schedule.json").string();
    write_file_atomic(path_, kOld);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  int num_temporaries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename().string().starts_with("schedule.json.tmp.");
    return n;
  }
  // Runs write_file_atomic(path_, 1 MiB) in a child limited to 4 KiB files. Returns the
  // wait status; the child exits 0 if the write threw with the promised message.
  int write_big_file_in_limited_child(bool ignore_sigxfsz) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const rlimit fsize{4096, 4096}, core{0, 0};
      ::setrlimit(RLIMIT_CORE, &core);
      ::setrlimit(RLIMIT_FSIZE, &fsize);
      if (ignore_sigxfsz) ::signal(SIGXFSZ, SIG_IGN);
      try {
        write_file_atomic(path_, std::string(1 << 20, 'x'));
      } catch (const std::runtime_error& e) {
        ::_exit(std::string(e.what()).find("is unchanged") != std::string::npos ? 0 : 2);
      }
      ::_exit(3);  // the write succeeded past the limit: impossible
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  static constexpr const char* kOld = "{\"old\": true}\n";
  fs::path dir_;
  std::string path_;
};

TEST_F(AtomicFile, AWriteThatFailsMidwayKeepsTheOldFileAndNoTemporary) {
  const int status = write_big_file_in_limited_child(/*ignore_sigxfsz=*/true);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the write did not fail with a message saying the file is unchanged";
  EXPECT_EQ(read(path_), kOld);
  EXPECT_EQ(num_temporaries(), 0);
}

TEST_F(AtomicFile, AWriterKilledMidwayLeavesTheOldFileAndTheNextWriteCleansUp) {
  const int status = write_big_file_in_limited_child(/*ignore_sigxfsz=*/false);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  EXPECT_EQ(read(path_), kOld);
  ASSERT_EQ(num_temporaries(), 1);  // the dead writer's half file, aside
  write_file_atomic(path_, "new\n");
  EXPECT_EQ(read(path_), "new\n");
  EXPECT_EQ(num_temporaries(), 0);  // Note [Stale temporaries]
}

TEST_F(AtomicFile, ALiveWritersTemporaryIsLeftAlone) {
  // pid 1 always runs: its temporary may be a write in progress.
  const std::string live = path_ + ".tmp.1";
  std::ofstream(live) << "in progress";
  write_file_atomic(path_, "new\n");
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ(read(path_), "new\n");
}

TEST_F(AtomicFile, AppendAddsWholeLines) {
  const std::string log = (dir_ / "runs.jsonl").string();
  append_line_atomic(log, "{\"a\": 1}");
  append_line_atomic(log, "{\"b\": 2}");
  EXPECT_EQ(read(log), "{\"a\": 1}\n{\"b\": 2}\n");
}

TEST_F(AtomicFile, AMissingDirectoryIsNamedWithItsFix) {
  try {
    write_file_atomic((dir_ / "no" / "such.json").string(), "x");
    FAIL() << "wrote into a missing directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("check that the directory exists"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memopt::solver
