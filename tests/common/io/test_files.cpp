// Whole-file reads, atomic file writes, and the crash guarantees of AtomicDirectory.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "common/io/files.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::scratch_directory;

// The names in a directory, sorted, to check that no temporary file was left behind.
std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Files, ReadMissingFileNamesThePath) {
  const std::string path = scratch_directory() + "/absent.bin";
  expect_error([&] { read_file(path); }, ErrorKind::Io, {path, "No such file"});
}

TEST(Files, ReadDirectoryIsAnError) {
  const std::string dir = scratch_directory();
  expect_error([&] { read_file(dir); }, ErrorKind::Io, {dir});
}

TEST(Files, WriteAtomicCreatesAndReplacesWithoutLeftovers) {
  const std::string dir = scratch_directory();
  const std::string path = dir + "/data.bin";
  const std::string first("first\0with a zero byte", 22);
  write_file_atomic(path, first);
  EXPECT_EQ(read_file(path), first);
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  EXPECT_EQ(file_size(path), 6);
  EXPECT_EQ(list_directory(dir), std::vector<std::string>{"data.bin"});
}

TEST(Files, WriteAtomicIntoMissingDirectoryNamesIt) {
  const std::string path = scratch_directory() + "/no/such/dir/data.bin";
  expect_error([&] { write_file_atomic(path, "x"); }, ErrorKind::Io, {path});
}

TEST(Files, UncommittedAtomicOutputFileLeavesOldContents) {
  const std::string dir = scratch_directory();
  const std::string path = dir + "/data.bin";
  write_file_atomic(path, "old");
  {
    AtomicOutputFile out(path);
    out.write("new contents that never get published");
  }
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(list_directory(dir), std::vector<std::string>{"data.bin"});
}

TEST(Files, InputFileReadsAtOffsetsAndReportsShortFiles) {
  const std::string path = scratch_directory() + "/data.bin";
  write_file_atomic(path, "0123456789");
  InputFile file(path);
  EXPECT_EQ(file.size(), 10);
  char buf[4] = {};
  file.read_at(3, buf, 4);
  EXPECT_EQ(std::string(buf, 4), "3456");
  expect_error([&] { file.read_at(8, buf, 4); }, ErrorKind::Io, {path, "ends at byte 10"});
}

TEST(Files, MakeDirectoriesAndParent) {
  const std::string dir = scratch_directory() + "/a/b/c";
  make_directories(dir);
  make_directories(dir);  // already there: fine
  EXPECT_TRUE(directory_exists(dir));
  EXPECT_EQ(parent_directory(dir), scratch_directory() + "/a/b");
  EXPECT_EQ(parent_directory("name"), ".");
  EXPECT_EQ(parent_directory("/name"), "/");
  EXPECT_EQ(parent_directory("a/b/"), "a");
}

// ---------------------------------------------------------------- AtomicDirectory

// A small "checkpoint": a directory with the given files.
void write_checkpoint(const std::string& path, const std::map<std::string, std::string>& files) {
  AtomicDirectory dir(path);
  for (const auto& [name, bytes] : files) dir.write_file(name, bytes);
  dir.commit();
}

TEST(AtomicDirectory, CommitPublishesTheFiles) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "weights"}, {"state.json", "{}"}});
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "weights");
  EXPECT_EQ(read_file(ckpt + "/state.json"), "{}");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});  // no .tmp, no .old
}

TEST(AtomicDirectory, CommitReplacesTheWholeOldDirectory) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "old weights"}, {"only_in_old.txt", "x"}});
  write_checkpoint(ckpt + "/", {{"model.bin", "new weights"}});  // a trailing slash names the same directory
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "new weights");
  EXPECT_FALSE(file_exists(ckpt + "/only_in_old.txt"));
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, UncommittedLeavesOldDirectoryUntouched) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "old weights"}});
  {
    AtomicDirectory dir(ckpt);
    dir.write_file("model.bin", "half-written new weights");
    EXPECT_TRUE(directory_exists(dir.temp_path()));
  }
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, FailureMidWriteLeavesOldCheckpointIntact) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "old weights"}, {"state.json", "{\"step\": 10}"}});
  auto save_that_fails = [&] {
    AtomicDirectory dir(ckpt);
    dir.write_file("model.bin", "new weights");
    throw std::runtime_error("disk full while writing the optimizer state");
  };
  EXPECT_THROW(save_that_fails(), std::runtime_error);
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(read_file(ckpt + "/state.json"), "{\"step\": 10}");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, StaleTemporaryOfACrashedWriterIsReplaced) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  make_directories(AtomicDirectory::temp_path_for(ckpt));
  write_file_durable(AtomicDirectory::temp_path_for(ckpt) + "/garbage.bin", "from a crashed run");
  write_checkpoint(ckpt, {{"model.bin", "weights"}});
  EXPECT_EQ(list_directory(ckpt), std::vector<std::string>{"model.bin"});
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, RecoverRestoresTheAsideCopy) {
  // The state a crash between the two renames of commit() leaves: only "ckpt.old" (plus a ".tmp").
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "old weights"}});
  make_directories(AtomicDirectory::temp_path_for(ckpt));
  EXPECT_FALSE(file_exists(ckpt));
  EXPECT_TRUE(AtomicDirectory::recover(ckpt));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_FALSE(file_exists(AtomicDirectory::aside_path_for(ckpt)));
}

TEST(AtomicDirectory, RecoverPrefersTheNewDirectoryAndDropsAStaleAsideCopy) {
  // The state a crash between publishing and removing the old copy leaves.
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "new weights"}});
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "old weights"}});
  EXPECT_TRUE(AtomicDirectory::recover(ckpt));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "new weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, CommitAfterACrashBetweenPublishAndCleanupKeepsTheNewest) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "second"}});
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "first"}});
  write_checkpoint(ckpt, {{"model.bin", "third"}});
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "third");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, RecoverWithNothingThereReturnsFalse) {
  EXPECT_FALSE(AtomicDirectory::recover(scratch_directory() + "/never_written"));
}

TEST(AtomicDirectory, FileNamesMustBePlain) {
  AtomicDirectory dir(scratch_directory() + "/ckpt");
  expect_error([&] { dir.path_of("../escape.bin"); }, ErrorKind::InvalidArgument, {"../escape.bin"});
  expect_error([&] { dir.path_of(""); }, ErrorKind::InvalidArgument);
  EXPECT_EQ(dir.path_of("model.safetensors"), dir.temp_path() + "/model.safetensors");
}

}  // namespace
}  // namespace lab
