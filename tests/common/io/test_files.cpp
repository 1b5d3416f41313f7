// Whole-file reads, atomic file writes, and the crash guarantees of AtomicDirectory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
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

// ---------------------------------------------------------------- check_file_writable

TEST(Files, CheckFileWritableMakesTheDirectoryAndLeavesNoProbe) {
  const std::string dir = scratch_directory();
  check_file_writable(dir + "/out/result.json");
  EXPECT_TRUE(directory_exists(dir + "/out"));
  EXPECT_EQ(list_directory(dir + "/out"), std::vector<std::string>{});
  EXPECT_FALSE(file_exists(dir + "/out/result.json"));
}

TEST(Files, CheckFileWritableRefusesDirectoriesAndUnwritablePlaces) {
  const std::string dir = scratch_directory();
  expect_error([&] { check_file_writable(dir); }, ErrorKind::Io, {dir, "is a directory"});
  expect_error([&] { check_file_writable("/proc/forbidden.json"); }, ErrorKind::Io,
               {"cannot write '/proc/forbidden.json'", "cannot create a file in '/proc'"});
}

// ---------------------------------------------------------------- AtomicDirectory

constexpr const char* kKind = "test checkpoint";
const std::string kMarker = AtomicDirectory::kMarkerName;

// A small "checkpoint": a directory with the given files.
void write_checkpoint(const std::string& path, const std::map<std::string, std::string>& files) {
  AtomicDirectory dir(path, kKind);
  for (const auto& [name, bytes] : files) dir.write_file(name, bytes);
  dir.commit();
}

// What a writer killed before commit() leaves: the temporary directory with its marker and some files.
void write_stale_temporary(const std::string& final_path, const std::string& kind = kKind) {
  const std::string temp = AtomicDirectory::temp_path_for(final_path);
  make_directories(temp);
  write_file_durable(temp + "/" + kMarker, kind + "\n");
  write_file_durable(temp + "/model.bin", "half of the weights");
}

TEST(AtomicDirectory, CommitPublishesTheFilesAndAMarkerListingThem) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "weights"}, {"state.json", "{}"}});
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "weights");
  EXPECT_EQ(read_file(ckpt + "/state.json"), "{}");
  EXPECT_EQ(read_file(ckpt + "/" + kMarker), "test checkpoint\nmodel.bin\nstate.json\n");
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
    AtomicDirectory dir(ckpt, kKind);
    dir.write_file("model.bin", "half-written new weights");
    EXPECT_TRUE(directory_exists(dir.temp_path()));
    EXPECT_EQ(read_file(dir.temp_path() + "/" + kMarker), "test checkpoint\n");  // the marker comes first
  }
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, FailureMidWriteLeavesOldCheckpointIntact) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "old weights"}, {"state.json", "{\"step\": 10}"}});
  auto save_that_fails = [&] {
    AtomicDirectory dir(ckpt, kKind);
    dir.write_file("model.bin", "new weights");
    throw std::runtime_error("disk full while writing the optimizer state");
  };
  EXPECT_THROW(save_that_fails(), std::runtime_error);
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(read_file(ckpt + "/state.json"), "{\"step\": 10}");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

// ---------------------------------------------------------------- what is never replaced

TEST(AtomicDirectory, RefusesANonEmptyDirectoryItDidNotWriteAndLeavesItAsItWas) {
  const std::string root = scratch_directory();
  const std::string mine = root + "/mine";
  make_directories(mine);
  write_file_durable(mine + "/important.txt", "x");
  expect_error(
      [&] {
        write_checkpoint(mine, {{"model.bin", "weights"}});
      },
      ErrorKind::Io,
      {"refusing to write the test checkpoint '" + mine + "'",
       "it is not empty and has no test checkpoint marker (it holds important.txt)"});
  expect_error([&] { AtomicDirectory::prepare(mine, kKind); }, ErrorKind::Io, {"important.txt"});
  EXPECT_EQ(list_directory(mine), std::vector<std::string>{"important.txt"});
  EXPECT_EQ(read_file(mine + "/important.txt"), "x");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"mine"});
}

TEST(AtomicDirectory, RefusesAFileASymbolicLinkAndANamelessPath) {
  const std::string root = scratch_directory();
  write_file_durable(root + "/afile", "notes");
  expect_error([&] { AtomicDirectory::prepare(root + "/afile", kKind); }, ErrorKind::Io,
               {"it is a file, not a directory"});
  EXPECT_EQ(read_file(root + "/afile"), "notes");
  write_checkpoint(root + "/ckpt", {{"model.bin", "weights"}});
  std::filesystem::create_directory_symlink(root + "/ckpt", root + "/link");
  expect_error([&] { AtomicDirectory::prepare(root + "/link", kKind); }, ErrorKind::Io, {"symbolic link"});
  for (const std::string& path : {std::string("."), root + "/..", std::string("/")})
    expect_error([&] { AtomicDirectory::prepare(path, kKind); }, ErrorKind::InvalidArgument, {"must end in a name"});
}

TEST(AtomicDirectory, RefusesACheckpointWithAFileAddedAndAnotherKind) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "weights"}});
  write_file_durable(ckpt + "/notes.txt", "my notes");
  expect_error([&] { AtomicDirectory::prepare(ckpt, kKind); }, ErrorKind::Io,
               {"not part of the test checkpoint written there (notes.txt)"});
  std::filesystem::remove(ckpt + "/notes.txt");
  expect_error([&] { AtomicDirectory::prepare(ckpt, "other kind"); }, ErrorKind::Io,
               {"written as 'test checkpoint', not as a other kind"});
  EXPECT_EQ(AtomicDirectory::prepare(ckpt, kKind), std::vector<std::string>{});
}

TEST(AtomicDirectory, CommitChecksTheFinalPathAgain) {
  // A user's file that appears in the old checkpoint while the new one is written stops the commit.
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "old weights"}});
  {
    AtomicDirectory dir(ckpt, kKind);
    dir.write_file("model.bin", "new weights");
    write_file_durable(ckpt + "/notes.txt", "written during the run");
    expect_error([&] { dir.commit(); }, ErrorKind::Io, {"notes.txt"});
  }
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(read_file(ckpt + "/notes.txt"), "written during the run");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, AcceptsAnEmptyDirectory) {
  const std::string root = scratch_directory();
  make_directories(root + "/empty");
  write_checkpoint(root + "/empty", {{"model.bin", "weights"}});
  EXPECT_EQ(read_file(root + "/empty/model.bin"), "weights");
}

TEST(AtomicDirectory, RefusesForeignFilesAtTheTemporaryAndAsidePaths) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  make_directories(ckpt + ".tmp");
  write_file_durable(ckpt + ".tmp/thesis.tex", "three years of work");
  expect_error([&] { AtomicDirectory::prepare(ckpt, kKind); }, ErrorKind::Io,
               {"'" + ckpt + ".tmp' is in the way", "thesis.tex"});
  EXPECT_EQ(read_file(ckpt + ".tmp/thesis.tex"), "three years of work");
  std::filesystem::rename(ckpt + ".tmp", ckpt + ".old");
  expect_error([&] { AtomicDirectory::prepare(ckpt, kKind); }, ErrorKind::Io, {"'" + ckpt + ".old' is in the way"});
  EXPECT_EQ(read_file(ckpt + ".old/thesis.tex"), "three years of work");
}

// ---------------------------------------------------------------- leftovers of interrupted writers

TEST(AtomicDirectory, PrepareRemovesAStaleTemporaryAndSaysSo) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_stale_temporary(ckpt);
  EXPECT_EQ(AtomicDirectory::prepare(ckpt, kKind),
            std::vector<std::string>{"removed '" + ckpt + ".tmp', left by an interrupted save"});
  EXPECT_EQ(list_directory(root), std::vector<std::string>{});
}

TEST(AtomicDirectory, StaleTemporaryOfACrashedWriterIsReplaced) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_stale_temporary(ckpt);
  write_checkpoint(ckpt, {{"model.bin", "weights"}});
  EXPECT_EQ(list_directory(ckpt), (std::vector<std::string>{kMarker, "model.bin"}));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

// A writer stopped while writing its first marker (a second signal during a save) leaves only the marker's
// temporary file in "<path>.tmp"; one stopped while rewriting its marker at commit leaves that file beside a
// marker and its files. Both are its own leftovers: the next writer cleans them and saves. A directory that holds
// such a file beside a file of someone else's is still refused.
TEST(AtomicDirectory, StaleTemporaryStoppedWhileWritingItsMarkerIsReplaced) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  const std::string temp = AtomicDirectory::temp_path_for(ckpt);
  const std::string marker_in_progress = "." + kMarker + ".tmp.UQs7uT";
  make_directories(temp);
  write_file_durable(temp + "/" + marker_in_progress, "test chec");
  EXPECT_EQ(AtomicDirectory::prepare(ckpt, kKind),
            std::vector<std::string>{"removed '" + temp + "', left by an interrupted save"});
  write_stale_temporary(ckpt);
  write_file_durable(temp + "/" + marker_in_progress, kKind + std::string("\nmodel.bin\n"));
  write_checkpoint(ckpt, {{"model.bin", "weights"}});
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "weights");

  make_directories(temp);
  write_file_durable(temp + "/" + marker_in_progress, "");
  write_file_durable(temp + "/notes.txt", "mine");
  expect_error([&] { AtomicDirectory::prepare(ckpt, kKind); }, ErrorKind::Io, {"has no test checkpoint marker"});
  EXPECT_EQ(read_file(temp + "/notes.txt"), "mine");
}

TEST(AtomicDirectory, ACrashAfterTheExchangeLeavesTheNewDirectoryInPlace) {
  // After commit() exchanged the directories, "ckpt.tmp" holds the complete old one until it is removed.
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "new weights"}});
  write_checkpoint(root + "/previous", {{"model.bin", "old weights"}});
  std::filesystem::rename(root + "/previous", ckpt + ".tmp");
  EXPECT_EQ(AtomicDirectory::prepare(ckpt, kKind),
            std::vector<std::string>{"removed '" + ckpt + ".tmp', left by an interrupted save"});
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "new weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, RecoverRestoresTheAsideCopy) {
  // The state a crash between the two renames of the fallback commit leaves: only "ckpt.old" (plus a ".tmp").
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "old weights"}});
  write_stale_temporary(ckpt);
  EXPECT_FALSE(file_exists(ckpt));
  EXPECT_TRUE(AtomicDirectory::recover(ckpt, kKind));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_FALSE(file_exists(AtomicDirectory::aside_path_for(ckpt)));
}

TEST(AtomicDirectory, PrepareRestoresTheAsideCopyAndSaysSo) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "old weights"}});
  write_stale_temporary(ckpt);
  EXPECT_EQ(
      AtomicDirectory::prepare(ckpt, kKind),
      (std::vector<std::string>{"restored '" + ckpt + "' from '" + ckpt + ".old', left aside by an interrupted save",
                                "removed '" + ckpt + ".tmp', left by an interrupted save"}));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "old weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, RecoverPrefersTheNewDirectoryAndDropsAStaleAsideCopy) {
  // The state a crash between publishing and removing the old copy leaves.
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  write_checkpoint(ckpt, {{"model.bin", "new weights"}});
  write_checkpoint(AtomicDirectory::aside_path_for(ckpt), {{"model.bin", "old weights"}});
  EXPECT_TRUE(AtomicDirectory::recover(ckpt, kKind));
  EXPECT_EQ(read_file(ckpt + "/model.bin"), "new weights");
  EXPECT_EQ(list_directory(root), std::vector<std::string>{"ckpt"});
}

TEST(AtomicDirectory, RecoverLeavesAForeignAsidePathAlone) {
  const std::string root = scratch_directory();
  const std::string ckpt = root + "/ckpt";
  make_directories(ckpt + ".old");
  write_file_durable(ckpt + ".old/mine.txt", "x");
  EXPECT_FALSE(AtomicDirectory::recover(ckpt, kKind));
  EXPECT_EQ(read_file(ckpt + ".old/mine.txt"), "x");
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
  EXPECT_FALSE(AtomicDirectory::recover(scratch_directory() + "/never_written", kKind));
}

TEST(AtomicDirectory, FileNamesMustBePlain) {
  AtomicDirectory dir(scratch_directory() + "/ckpt", kKind);
  expect_error([&] { dir.path_of("../escape.bin"); }, ErrorKind::InvalidArgument, {"../escape.bin"});
  expect_error([&] { dir.path_of(""); }, ErrorKind::InvalidArgument);
  expect_error([&] { dir.path_of(kMarker); }, ErrorKind::InvalidArgument);
  expect_error([&] { dir.path_of("two\nlines"); }, ErrorKind::InvalidArgument);
  EXPECT_EQ(dir.path_of("model.safetensors"), dir.temp_path() + "/model.safetensors");
}

}  // namespace
}  // namespace lab
