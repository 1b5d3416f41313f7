// Files: whole-file reads, positioned reads, and writes that never leave a half-written file behind.
//
// Durability follows the usual POSIX recipe. A new file is written under a temporary name in the same
// directory, flushed with fsync, and renamed over the final name; then the directory itself is fsynced so
// the rename survives a power cut. rename() within one file system is atomic, so a reader sees either the
// old complete file or the new complete file, never a mixture.
//
// A checkpoint is a directory of several files, and it gets the same guarantee from AtomicDirectory
// (below). Every failure is Error(Io) naming the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lab {

// ---------------------------------------------------------------- small helpers

bool file_exists(const std::string& path);  // any kind of file system entry
bool directory_exists(const std::string& path);
int64_t file_size(const std::string& path);             // Error(Io) when it cannot be stat'ed
void make_directories(const std::string& path);         // like `mkdir -p`; fine when it already exists
void remove_all(const std::string& path);               // like `rm -rf`; fine when it does not exist
std::string parent_directory(const std::string& path);  // "a/b/c" -> "a/b", "c" -> "."

// fsync of a directory: makes renames and creations inside it durable.
void fsync_directory(const std::string& path);

// The whole file as bytes.
std::string read_file(const std::string& path);

// Replaces `path` with `bytes` atomically (temporary sibling + fsync + rename + fsync of the directory).
void write_file_atomic(const std::string& path, std::string_view bytes);

// Writes `bytes` to `path` (created or truncated) and fsyncs it. Not atomic on its own: meant for files
// inside an AtomicDirectory, whose commit() provides the atomicity.
void write_file_durable(const std::string& path, std::string_view bytes);

// ---------------------------------------------------------------- InputFile

// A file opened for positioned reads (pread), so large files are read piece by piece into their
// destination instead of being loaded whole.
class InputFile {
 public:
  explicit InputFile(const std::string& path);  // Error(Io) when it cannot be opened
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }
  // Reads exactly `bytes` bytes at `offset`; Error(Io) on a read error or when the file ends early.
  void read_at(int64_t offset, void* dst, size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// ---------------------------------------------------------------- AtomicOutputFile

// Streams a file to a temporary sibling and publishes it with commit(). Destroying it without commit()
// removes the temporary, so a writer that throws half way leaves the old file (if any) untouched.
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(const std::string& path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync, rename over the final path, fsync the directory. Call once.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
};

// ---------------------------------------------------------------- AtomicDirectory

// Writes a directory (a checkpoint) so that a crash at any moment leaves either the complete old
// directory or the complete new one.
//
//   AtomicDirectory dir("run/ckpt");                 // creates the fresh, empty "run/ckpt.tmp"
//   write_file_durable(dir.path_of("state.json"), text);
//   write_safetensors(dir.path_of("model.safetensors"), tensors);
//   dir.commit();                                    // "run/ckpt" now holds exactly these files
//
// commit() fsyncs every file in the temporary directory and the directory itself, then
//   1. renames the old "run/ckpt" aside to "run/ckpt.old"   (fsync of "run")
//   2. renames "run/ckpt.tmp" to "run/ckpt"                 (fsync of "run")
//   3. removes "run/ckpt.old"                               (fsync of "run")
// A crash before step 1 leaves the old directory in place (and a stale ".tmp" that the next writer
// removes). A crash between steps 1 and 2 leaves only the aside copy: call recover() before reading,
// which renames "ckpt.old" back to "ckpt". A crash between steps 2 and 3 leaves the new directory in
// place and a stale ".old" that recover() and the next commit() remove.
//
// One writer per final path at a time (the temporary and aside names are fixed so that leftovers of a
// crashed writer are found and cleaned). Destroying an AtomicDirectory without commit() removes the
// temporary directory and leaves the final one untouched.
class AtomicDirectory {
 public:
  explicit AtomicDirectory(std::string final_path);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The path of file `name` inside the temporary directory; `name` is a plain file name (no '/').
  std::string path_of(const std::string& name) const;
  // write_file_durable(path_of(name), bytes).
  void write_file(const std::string& name, std::string_view bytes) const;

  void commit();
  bool committed() const { return committed_; }

  // Makes `final_path` the complete directory after any crash of a commit (see above). Returns true when
  // a directory exists at `final_path` afterwards.
  static bool recover(const std::string& final_path);
  static std::string temp_path_for(const std::string& final_path) { return final_path + ".tmp"; }
  static std::string aside_path_for(const std::string& final_path) { return final_path + ".old"; }

 private:
  std::string final_path_;
  std::string temp_path_;
  bool committed_ = false;
};

}  // namespace lab
