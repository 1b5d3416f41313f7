// POSIX file I/O with the error handling and fsync discipline described in files.h.
#include "common/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "common/core/error.h"

namespace lab {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_errno(const char* what, const std::string& path) {
  fail(ErrorKind::Io, "cannot ", what, " '", path, "': ", std::strerror(errno));
}

// write(2) may write less than asked (signals, pipes); loop until everything is out.
void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void fsync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) fail_errno("fsync", path);
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail_errno("open for fsync", path);
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) fail_errno("fsync", path);
}

void rename_path(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail(ErrorKind::Io, "cannot rename '", from, "' to '", to, "': ", std::strerror(errno));
}

// Creates and removes a probe file in `dir`: the one sure test that files can be created there (permissions,
// read-only mounts, pseudo file systems). `for_path` is the output the probe is for, named in the error.
void probe_directory(const std::string& dir, const std::string& for_path) {
  std::string pattern = dir + "/.write-probe.XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0)
    fail(ErrorKind::Io, "cannot write '", for_path, "': cannot create a file in '", dir, "': ", std::strerror(errno));
  ::close(fd);
  ::unlink(pattern.c_str());
}

// Trailing slashes would put the ".tmp"/".old" siblings inside the directory instead of beside it.
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

// ---------------------------------------------------------------- small helpers

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool directory_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail_errno("stat", path);
  return static_cast<int64_t>(st.st_size);
}

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) fail(ErrorKind::Io, "cannot create directory '", path, "': ", ec.message());
  LAB_CHECK(directory_exists(path), Io, "cannot create directory '", path, "': a file of that name exists");
}

void remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail(ErrorKind::Io, "cannot remove '", path, "': ", ec.message());
}

std::string parent_directory(const std::string& path) {
  const std::string p = without_trailing_slashes(path);
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

void fsync_directory(const std::string& path) {
  fsync_path(path, O_RDONLY | O_DIRECTORY);
}

std::string read_file(const std::string& path) {
  InputFile file(path);
  std::string bytes(static_cast<size_t>(file.size()), '\0');
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicOutputFile file(path);
  file.write(bytes);
  file.commit();
}

void write_file_durable(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno("create", path);
  try {
    write_all(fd, bytes.data(), bytes.size(), path);
    fsync_fd(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail_errno("close", path);
}

// ---------------------------------------------------------------- InputFile

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_errno("open", path);
  struct stat st;
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  const int saved = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    errno = saved;
    if (!stat_ok) fail_errno("stat", path);
    fail(ErrorKind::Io, "cannot read '", path, "': not a regular file");
  }
  size_ = static_cast<int64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(int64_t offset, void* dst, size_t bytes) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path_);
    }
    LAB_CHECK(n > 0, Io, "cannot read '", path_, "': file ends at byte ", offset, " with ", bytes,
              " bytes still to read");
    p += n;
    offset += n;
    bytes -= static_cast<size_t>(n);
  }
}

// ---------------------------------------------------------------- AtomicOutputFile

AtomicOutputFile::AtomicOutputFile(const std::string& path) : path_(path) {
  // mkstemp gives a unique name, so concurrent writers of different files never collide.
  const std::string dir = parent_directory(path);
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string pattern = dir + "/." + base + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail_errno("create a temporary file for", path);
  temp_path_ = name.data();
  ::fchmod(fd_, 0644);  // mkstemp creates 0600; a published file should read like any other
}

AtomicOutputFile::~AtomicOutputFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicOutputFile::write(const void* data, size_t bytes) {
  LAB_CHECK(fd_ >= 0, Internal, "write to '", path_, "' after commit()");
  write_all(fd_, data, bytes, temp_path_);
}

void AtomicOutputFile::commit() {
  LAB_CHECK(fd_ >= 0, Internal, "commit() of '", path_, "' called twice");
  fsync_fd(fd_, temp_path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_path_.c_str());
    fail_errno("close", temp_path_);
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp_path_.c_str());
    errno = saved;
    fail_errno("rename a temporary file onto", path_);
  }
  fsync_directory(parent_directory(path_));
}

// ---------------------------------------------------------------- output checks

void check_file_writable(const std::string& path) {
  LAB_CHECK(!path.empty(), InvalidArgument, "an output path is empty");
  LAB_CHECK(!directory_exists(path), Io, "cannot write '", path, "': it is a directory");
  const std::string dir = parent_directory(path);
  make_directories(dir);
  probe_directory(dir, path);
}

// ---------------------------------------------------------------- AtomicDirectory

namespace {

// The names a directory holds, sorted. Error(Io) when it cannot be listed.
std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) fail(ErrorKind::Io, "cannot list '", dir, "': ", ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  return names.size() > 3 ? cat(out, " and ", names.size() - 3, " more") : out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// True for the temporary file of a marker being written (write_file_atomic's ".<name>.tmp.XXXXXX"): a writer
// stopped in the middle of writing its marker (a second signal, a crash) leaves it beside what it wrote.
bool is_marker_in_progress(const std::string& name) {
  const std::string prefix = std::string(".") + AtomicDirectory::kMarkerName + ".tmp.";
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0;
}

// Why a writer of `kind` directories must not replace or remove what is at `path`; "" when it may: nothing
// there, an empty directory, or a directory whose marker holds `kind` and which holds nothing else than the
// marker lists (a marker that lists nothing belongs to a writer that never committed: all of it is its own).
// A marker's own temporary files count as the writer's: a directory that holds nothing else is one whose writer
// stopped before its first marker landed.
std::string why_not_ours(const std::string& path, const std::string& kind) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";
    fail_errno("inspect", path);
  }
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is a file, not a directory";
  const std::vector<std::string> entries = directory_entries(path);
  if (std::all_of(entries.begin(), entries.end(), is_marker_in_progress)) return "";
  const std::string marker = path + "/" + AtomicDirectory::kMarkerName;
  if (::lstat(marker.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return cat("it is not empty and has no ", kind, " marker (it holds ", first_names(entries), ")");
  const std::vector<std::string> listed = lines_of(read_file(marker));
  if (listed.empty() || listed.front() != kind)
    return cat("it was written as '", listed.empty() ? "" : listed.front(), "', not as a ", kind);
  if (listed.size() == 1) return "";
  std::vector<std::string> foreign;
  for (const std::string& name : entries)
    if (name != AtomicDirectory::kMarkerName && !is_marker_in_progress(name) &&
        std::find(listed.begin() + 1, listed.end(), name) == listed.end())
      foreign.push_back(name);
  if (foreign.empty()) return "";
  return cat("it holds files that are not part of the ", kind, " written there (", first_names(foreign), ")");
}

void refuse_unless_ours(const std::string& path, const std::string& kind, const std::string& final_path) {
  const std::string why = why_not_ours(path, kind);
  if (why.empty()) return;
  if (path == final_path)
    fail(ErrorKind::Io, "refusing to write the ", kind, " '", path, "': ", why,
         "; give a new path, or the path of an earlier ", kind);
  fail(ErrorKind::Io, "refusing to write the ", kind, " '", final_path, "': '", path, "' is in the way and ", why,
       "; move it away");
}

// Swaps two directory entries in one atomic step. False when the file system cannot (then nothing happened).
bool exchange_paths(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS) return false;
  fail(ErrorKind::Io, "cannot exchange '", a, "' and '", b, "': ", std::strerror(errno));
}

// A directory left aside by an interrupted fallback commit: renamed back when the final path is empty,
// removed when a newer directory was published. Returns a line saying what was done ("" when nothing).
std::string restore_aside(const std::string& final_path, const std::string& kind) {
  const std::string aside = AtomicDirectory::aside_path_for(final_path);
  if (!file_exists(aside) || !why_not_ours(aside, kind).empty()) return "";
  const std::string parent = parent_directory(final_path);
  if (file_exists(final_path)) {
    remove_all(aside);
    fsync_directory(parent);
    return cat("removed '", aside, "', the previous ", kind, " left aside by an interrupted save");
  }
  rename_path(aside, final_path);
  fsync_directory(parent);
  return cat("restored '", final_path, "' from '", aside, "', left aside by an interrupted save");
}

}  // namespace

std::vector<std::string> AtomicDirectory::prepare(const std::string& path, const std::string& kind) {
  const std::string final_path = without_trailing_slashes(path);
  const std::string name = final_path.substr(final_path.rfind('/') + 1);
  LAB_CHECK(!name.empty() && name != "." && name != "..", InvalidArgument, "the ", kind, " path '", path,
            "' must end in a name (not '/', '.' or '..')");
  refuse_unless_ours(final_path, kind, final_path);
  refuse_unless_ours(aside_path_for(final_path), kind, final_path);
  refuse_unless_ours(temp_path_for(final_path), kind, final_path);
  std::vector<std::string> notes;
  if (std::string note = restore_aside(final_path, kind); !note.empty()) notes.push_back(std::move(note));
  const std::string temp = temp_path_for(final_path);
  if (file_exists(temp)) {
    remove_all(temp);
    notes.push_back(cat("removed '", temp, "', left by an interrupted save"));
  }
  const std::string parent = parent_directory(final_path);
  make_directories(parent);
  probe_directory(parent, final_path);
  return notes;
}

bool AtomicDirectory::recover(const std::string& path, const std::string& kind) {
  const std::string final_path = without_trailing_slashes(path);
  restore_aside(final_path, kind);
  return directory_exists(final_path);
}

AtomicDirectory::AtomicDirectory(std::string final_path, std::string kind)
    : final_path_(without_trailing_slashes(std::move(final_path))),
      kind_(std::move(kind)),
      temp_path_(temp_path_for(final_path_)) {
  LAB_CHECK(!kind_.empty() && kind_.find('\n') == std::string::npos, InvalidArgument,
            "a directory kind is one non-empty line");
  prepare(final_path_, kind_);
  if (::mkdir(temp_path_.c_str(), 0755) != 0) fail_errno("create directory", temp_path_);
  // The marker comes first, so that a writer interrupted at any later point leaves a recognisable directory.
  // Both writes of the marker are atomic: a crash never leaves a half-written one.
  write_file_atomic(temp_path_ + "/" + kMarkerName, kind_ + "\n");
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code ignored;  // a destructor must not throw; a leftover is cleaned by the next writer
  fs::remove_all(temp_path_, ignored);
}

std::string AtomicDirectory::path_of(const std::string& name) const {
  LAB_CHECK(!name.empty() && name != "." && name != ".." && name != kMarkerName &&
                name.find_first_of("/\n") == std::string::npos,
            InvalidArgument, "file name '", name, "' must be a plain file name");
  return temp_path_ + "/" + name;
}

void AtomicDirectory::write_file(const std::string& name, std::string_view bytes) const {
  write_file_durable(path_of(name), bytes);
}

void AtomicDirectory::commit() {
  LAB_CHECK(!committed_, Internal, "commit() of '", final_path_, "' called twice");
  std::string marker = kind_ + "\n";
  for (const std::string& name : directory_entries(temp_path_))
    if (name != kMarkerName) marker += name + "\n";
  write_file_atomic(temp_path_ + "/" + kMarkerName, marker);
  // Files may have been written by any means (path_of + a library writer), so make each one durable here
  // rather than trusting that its writer did.
  for (const auto& entry : fs::recursive_directory_iterator(temp_path_)) {
    if (entry.is_regular_file()) fsync_path(entry.path().string(), O_RDONLY);
    if (entry.is_directory()) fsync_directory(entry.path().string());
  }
  fsync_directory(temp_path_);

  refuse_unless_ours(final_path_, kind_, final_path_);
  const std::string parent = parent_directory(final_path_);
  if (!file_exists(final_path_)) {
    rename_path(temp_path_, final_path_);
    committed_ = true;
  } else if (exchange_paths(temp_path_, final_path_)) {
    committed_ = true;  // the temporary path now holds the old directory, which goes
    fsync_directory(parent);
    remove_all(temp_path_);
  } else {
    const std::string aside = aside_path_for(final_path_);
    refuse_unless_ours(aside, kind_, final_path_);
    remove_all(aside);
    rename_path(final_path_, aside);
    fsync_directory(parent);
    rename_path(temp_path_, final_path_);
    committed_ = true;
    fsync_directory(parent);
    remove_all(aside);
  }
  fsync_directory(parent);
}

}  // namespace lab
