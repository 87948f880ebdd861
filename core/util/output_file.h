// Writing an output file safely: the rules every command that writes a file follows.
//
// - The target is never something other than a regular file: an existing directory,
//   device, FIFO, socket or symbolic link at the path is refused, untouched.
// - The target is never one of the command's own inputs (the same file by device and
//   inode: `-o` naming the model or the records file).
// - A file replaced keeps its permission bits.
// - The bytes go to a temporary file in the target's folder, created exclusively
//   (O_EXCL, never following a link), every write and the close checked, flushed to
//   disk, then renamed over the target: a reader sees the old file or the new one,
//   never half of one. On any failure the temporary is removed and the target is as
//   it was. Temporaries of a process that was killed (`.NAME.basin-tmp-PID` with no
//   such process) are removed by the next write of the same target.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace basin {

class OutputFile {
 public:
  // Appends bytes; throws Error naming the target when the write fails (a full disk).
  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }

 private:
  friend void write_output_file(const std::string&, const std::function<void(OutputFile&)>&,
                                const std::vector<std::string>&);
  OutputFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
  std::string buffer_;
  void flush();
};

// Writes `path` through `fill` by the rules above. `inputs` are the paths the command
// reads (missing ones are ignored). Throws Error naming the path and the reason.
void write_output_file(const std::string& path, const std::function<void(OutputFile&)>& fill,
                       const std::vector<std::string>& inputs = {});

// Checks the rules that do not need the bytes (the target's kind, the inputs), so that
// a command fails before its work rather than after it.
void check_output_path(const std::string& path, const std::vector<std::string>& inputs = {});

}  // namespace basin
