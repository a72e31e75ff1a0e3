// atomic_file.h: the one way memopt writes a file -- to a temporary file in the same
// directory, fsync'd, then renamed into place -- so that an interrupted command (an
// exception, a full disk, SIGKILL, a power cut) leaves the old file or none, never
// half of one that a later step would trust. Every profile, schedule, report and
// weight file goes through here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memopt::solver {

// Writes `parts` one after the other as the new content of `path`. The temporary is
// "<path>.tmp.<pid>"; on any failure it is removed, `path` is untouched and the error
// (std::runtime_error) names the path, the step that failed and the fix. Temporaries
// left behind by processes that were killed mid-write (their pid no longer runs) are
// removed first, so they never pile up.
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);
inline void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(path, std::vector<std::string_view>{text});
}

// Appends `line` (a newline is added) to `path`, which may not exist yet, by
// rewriting it atomically: a reader never sees a torn last line. For the small
// JSON-lines logs the CLI keeps (memopt run --summary-out), not for big files.
void append_line_atomic(const std::string& path, std::string_view line);

}  // namespace memopt::solver
