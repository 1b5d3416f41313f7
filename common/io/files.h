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
#include <vector>

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

// ---------------------------------------------------------------- output checks

// Before any work: checks that a file can be written at `path`. It must not be a directory, its directory must
// exist or be creatable (it is created), and a probe file must be creatable there (it is removed at once).
// Error(Io) naming the path and the system's reason. Programs call this for every output path before they start,
// so that an output that cannot be written is found in a second, not after hours of work.
void check_file_writable(const std::string& path);

// ---------------------------------------------------------------- AtomicDirectory

// Writes a directory (a checkpoint) so that a crash at any moment leaves either the complete old
// directory or the complete new one, and never removes or replaces anything it did not write.
//
//   AtomicDirectory dir("run/ckpt", "gpt2-labs checkpoint");  // creates the fresh "run/ckpt.tmp"
//   write_file_durable(dir.path_of("state.json"), text);
//   write_safetensors(dir.path_of("model.safetensors"), tensors);
//   dir.commit();                                             // "run/ckpt" now holds exactly these files
//
// Ownership. The first file written into the temporary directory is a marker, ".lab-directory", holding the
// directory's kind (a name such as "gpt2-labs checkpoint"); commit() adds the names of the files written, and
// the marker is published with them. A path is only ever replaced or removed when it is absent, an empty
// directory, or a directory whose marker holds the same kind and which holds nothing the marker does not list.
// Anything else (a user's directory, a file, a symbolic link, a checkpoint with a user's file added) is refused
// with Error(Io) naming it, and left as it was. The same rule guards the temporary "<path>.tmp" and the
// aside copy "<path>.old" below: they are cleaned only when they are leftovers of this kind. A writer stopped while
// writing a marker leaves the marker's temporary file (".<marker>.tmp.XXXXXX", write_file_atomic's name), which
// counts as its own: alone, it marks a temporary directory whose first marker never landed.
//
// commit() fsyncs every file in the temporary directory and the directory itself, then publishes it in one
// atomic step: a rename when nothing is at the final path, else an exchange of the two directories
// (renameat2 RENAME_EXCHANGE), after which "<path>.tmp" holds the old directory and is removed. At every
// moment the final path holds a complete directory; a crash leaves at worst a stale "<path>.tmp" that
// prepare() removes. On a file system that cannot exchange (EINVAL), commit() falls back to
//   1. rename the old "run/ckpt" aside to "run/ckpt.old"   2. rename "run/ckpt.tmp" to "run/ckpt"
//   3. remove "run/ckpt.old"
// where a crash between steps 1 and 2 leaves only the aside copy, which prepare() and recover() rename back.
//
// One writer per final path at a time (the temporary and aside names are fixed so that leftovers of a
// crashed writer are found and cleaned). Destroying an AtomicDirectory without commit() removes the
// temporary directory and leaves the final one untouched.
class AtomicDirectory {
 public:
  // Runs prepare() (refusing a final path that is not this kind's) and creates the temporary directory.
  AtomicDirectory(std::string final_path, std::string kind);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The path of file `name` inside the temporary directory; `name` is a plain file name (no '/').
  std::string path_of(const std::string& name) const;
  // write_file_durable(path_of(name), bytes).
  void write_file(const std::string& name, std::string_view bytes) const;

  // Checks the final path again (something may have appeared there while the files were written), then
  // publishes the directory as described above.
  void commit();

  // Before any work: refuses (Error(Io), nothing touched) a final path, temporary or aside copy that is not
  // absent, empty or a directory of this kind; restores a directory left aside by an interrupted commit;
  // removes a stale temporary directory; makes the parent directory and checks that it can be written.
  // Returns one line for each thing it cleaned, for the caller to print.
  static std::vector<std::string> prepare(const std::string& final_path, const std::string& kind);
  // For readers: restores a directory left aside by an interrupted commit (only when it is of this kind).
  // Returns true when a directory exists at `final_path` afterwards.
  static bool recover(const std::string& final_path, const std::string& kind);
  static std::string temp_path_for(const std::string& final_path) { return final_path + ".tmp"; }
  static std::string aside_path_for(const std::string& final_path) { return final_path + ".old"; }
  static constexpr const char* kMarkerName = ".lab-directory";

 private:
  std::string final_path_;
  std::string kind_;
  std::string temp_path_;
  bool committed_ = false;
};

}  // namespace lab
