// POSIX file I/O with the error handling and fsync discipline described in files.h.
#include "common/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
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

// ---------------------------------------------------------------- AtomicDirectory

AtomicDirectory::AtomicDirectory(std::string final_path)
    : final_path_(without_trailing_slashes(std::move(final_path))), temp_path_(temp_path_for(final_path_)) {
  make_directories(parent_directory(final_path_));
  remove_all(temp_path_);  // a leftover of a writer that crashed before commit()
  if (::mkdir(temp_path_.c_str(), 0755) != 0) fail_errno("create directory", temp_path_);
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code ignored;  // a destructor must not throw; a leftover is cleaned by the next writer
  fs::remove_all(temp_path_, ignored);
}

std::string AtomicDirectory::path_of(const std::string& name) const {
  LAB_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos, InvalidArgument,
            "checkpoint file name '", name, "' must be a plain file name");
  return temp_path_ + "/" + name;
}

void AtomicDirectory::write_file(const std::string& name, std::string_view bytes) const {
  write_file_durable(path_of(name), bytes);
}

void AtomicDirectory::commit() {
  LAB_CHECK(!committed_, Internal, "commit() of '", final_path_, "' called twice");
  // Files may have been written by any means (path_of + a library writer), so make each one durable here
  // rather than trusting that its writer did.
  for (const auto& entry : fs::recursive_directory_iterator(temp_path_)) {
    if (entry.is_regular_file()) fsync_path(entry.path().string(), O_RDONLY);
    if (entry.is_directory()) fsync_directory(entry.path().string());
  }
  fsync_directory(temp_path_);

  const std::string parent = parent_directory(final_path_);
  const std::string aside = aside_path_for(final_path_);
  if (file_exists(final_path_)) {
    // A stale aside copy exists only when a previous commit crashed after publishing its new directory,
    // so the final directory is complete and the aside copy can go.
    remove_all(aside);
    rename_path(final_path_, aside);
    fsync_directory(parent);
  }
  rename_path(temp_path_, final_path_);
  committed_ = true;
  fsync_directory(parent);
  remove_all(aside);
  fsync_directory(parent);
}

bool AtomicDirectory::recover(const std::string& final_path) {
  const std::string path = without_trailing_slashes(final_path);
  const std::string aside = aside_path_for(path);
  if (directory_exists(path)) {
    remove_all(aside);
  } else if (directory_exists(aside)) {
    rename_path(aside, path);
    fsync_directory(parent_directory(path));
  }
  return directory_exists(path);
}

}  // namespace lab
