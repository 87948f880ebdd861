#include "core/util/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/error.h"

namespace basin {

namespace {

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string why() { return std::strerror(errno); }

// Removes `.BASE.basin-tmp-PID` files of `dir` whose process is gone.
void remove_stale_temporaries(const std::string& dir, const std::string& base) {
  const std::string prefix = "." + base + ".basin-tmp-";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == getpid() || (kill(pid, 0) == 0 || errno == EPERM)) continue;  // alive (or not ours to judge)
    unlink((dir + "/" + name).c_str());
  }
  closedir(d);
}

}  // namespace

void check_output_path(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) throw Error("the output path is empty");
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) throw Error("'" + path + "' is a symbolic link: give the path of a regular file to write");
    if (!S_ISREG(st.st_mode))
      throw Error("'" + path + "' exists and is not a regular file (a device, folder or FIFO): not replaced");
    for (const std::string& in : inputs) {
      struct stat is;
      if (!in.empty() && stat(in.c_str(), &is) == 0 && is.st_dev == st.st_dev && is.st_ino == st.st_ino)
        throw Error("'" + path + "' is also an input of this command ('" + in + "'): it would be overwritten");
    }
  } else if (errno != ENOENT) {
    throw Error("cannot write '" + path + "': " + why());
  }
  struct stat ds;
  const std::string dir = dir_of(path);
  if (stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
    throw Error("cannot write '" + path + "': no folder '" + dir + "'");
}

void OutputFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("writing '" + path_ + "' failed: " + (n < 0 ? why() : std::string("no space written")));
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void OutputFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  if (n >= (size_t{1} << 20)) {  // large blocks (weights) go straight out
    flush();
    buffer_.assign(p, n);
    flush();
    std::string().swap(buffer_);
    return;
  }
  buffer_.append(p, n);
  if (buffer_.size() >= (size_t{1} << 20)) flush();
}

void write_output_file(const std::string& path, const std::function<void(OutputFile&)>& fill,
                       const std::vector<std::string>& inputs) {
  check_output_path(path, inputs);
  const std::string dir = dir_of(path), base = base_of(path);
  remove_stale_temporaries(dir, base);
  const std::string tmp = dir + "/." + base + ".basin-tmp-" + std::to_string(getpid());
  unlink(tmp.c_str());  // our own, from an earlier write of this process
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write '" + path + "': creating its temporary '" + tmp + "': " + why());
  try {
    // A file replaced keeps its permissions (a private file stays private).
    struct stat old;
    if (stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) && fchmod(fd, old.st_mode & 07777) != 0)
      throw Error("cannot write '" + path + "': setting its permissions: " + why());
    OutputFile f(fd, path);
    fill(f);
    f.flush();
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) throw Error("writing '" + path + "' failed: " + why());
    const int closed = close(fd);
    fd = -1;
    if (closed != 0) throw Error("writing '" + path + "' failed: " + why());
    // The target may have changed kind since the check: check again, then move.
    check_output_path(path, inputs);
    if (rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot move the new '" + path + "' into place: " + why());
  } catch (...) {
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    throw;
  }
}

}  // namespace basin
