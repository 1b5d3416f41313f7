// DocumentReader: the three document splits against a whole-string reference, documents cut into pieces
// for small chunks, input larger than one read block, and clear errors for bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ch05_data/tokenize/document_reader.h"
#include "common/text/pretokenizer.h"
#include "tests/ch05_data/tokenize_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

using lab::testing::expect_error;
using lab::testing::scratch_directory;
using testing::reference_documents;

struct ReadResult {
  std::vector<std::string> documents;  // pieces joined back
  int64_t pieces = 0;
  size_t largest_chunk = 0;
};

ReadResult read_all(const std::vector<std::string>& paths, DocSplit split, size_t chunk_bytes) {
  DocumentReader reader(paths, split, chunk_bytes);
  ReadResult result;
  TextChunk chunk;
  while (reader.next(&chunk)) {
    result.largest_chunk = std::max(result.largest_chunk, chunk.text.size());
    for (const DocumentPiece& piece : chunk.pieces) {
      const std::string text = chunk.text.substr(piece.offset, piece.size);
      EXPECT_GT(piece.size, 0u);
      if (piece.first) {
        EXPECT_EQ(piece.document, static_cast<int64_t>(result.documents.size()));
        result.documents.push_back(text);
      } else {
        EXPECT_EQ(piece.document + 1, static_cast<int64_t>(result.documents.size())) << "a piece out of order";
        result.documents.back() += text;
      }
      ++result.pieces;
    }
  }
  EXPECT_EQ(reader.documents(), static_cast<int64_t>(result.documents.size()));
  return result;
}

std::vector<std::string> write_files(const std::string& dir, const std::vector<std::string>& texts) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < texts.size(); ++i) {
    paths.push_back(dir + "/input" + std::to_string(i) + ".txt");
    write_file_atomic(paths.back(), texts[i]);
  }
  return paths;
}

using Docs = std::vector<std::string>;

TEST(DocumentReader, FileSplitSkipsEmptyFiles) {
  const auto paths = write_files(scratch_directory(), {"a b c", "", "d\n\ne\n"});
  EXPECT_EQ(read_all(paths, DocSplit::File, 1 << 20).documents, (Docs{"a b c", "d\n\ne\n"}));
}

TEST(DocumentReader, BlankLineSplit) {
  const auto paths = write_files(scratch_directory(),
                                 {"\n\nfirst line\nsecond\n\n\n\nnext \n \nsame\n\nlast\n", "other file\n\n", "\n"});
  EXPECT_EQ(read_all(paths, DocSplit::BlankLine, 1 << 20).documents,
            (Docs{"first line\nsecond", "next \n \nsame", "last\n", "other file"}));
}

TEST(DocumentReader, LineSplit) {
  const auto paths = write_files(scratch_directory(), {"a\n\nb b\nc", "\nd\n"});
  EXPECT_EQ(read_all(paths, DocSplit::Line, 1 << 20).documents, (Docs{"a", "b b", "c", "d"}));
}

TEST(DocumentReader, SmallChunksCutDocumentsOnlyAtSplitPoints) {
  const std::string text = testing::make_corpus(1, 60);
  const auto paths = write_files(scratch_directory(), {text});
  for (const DocSplit split : {DocSplit::File, DocSplit::BlankLine, DocSplit::Line}) {
    const ReadResult result = read_all(paths, split, 64);
    EXPECT_EQ(result.documents, reference_documents({text}, split)) << to_string(split);
    EXPECT_GT(result.pieces, static_cast<int64_t>(result.documents.size())) << "no document was cut";
  }
  // Every cut lies at a split point: the text before it ends with a printable ASCII character and the text
  // after it starts with ASCII white space.
  DocumentReader reader(paths, DocSplit::File, 64);
  TextChunk chunk;
  std::string document;
  while (reader.next(&chunk)) {
    for (const DocumentPiece& piece : chunk.pieces) {
      const std::string text_piece = chunk.text.substr(piece.offset, piece.size);
      if (!piece.first) {
        EXPECT_EQ(text::last_split_point(document + text_piece.substr(0, 1)), document.size());
      }
      document += text_piece;
    }
  }
  EXPECT_EQ(document, text);
}

TEST(DocumentReader, InputLargerThanOneReadBlock) {
  // About 3 MB in two files, so separators and documents straddle the 1 MiB read blocks.
  const std::vector<std::string> texts = {testing::make_corpus(2, 12000), testing::make_corpus(3, 4000)};
  ASSERT_GT(texts[0].size(), size_t{2} << 20);
  const auto paths = write_files(scratch_directory(), texts);
  for (const DocSplit split : {DocSplit::File, DocSplit::BlankLine, DocSplit::Line}) {
    const ReadResult result = read_all(paths, split, 1 << 20);
    EXPECT_EQ(result.documents, reference_documents(texts, split)) << to_string(split);
    EXPECT_LT(result.largest_chunk, size_t{3} << 20) << to_string(split);
  }
}

TEST(DocumentReader, MissingInputNamesTheFile) {
  const std::string dir = scratch_directory();
  const auto paths = write_files(dir, {"x"});
  const std::string missing = dir + "/absent.txt";
  expect_error([&] { DocumentReader({paths[0], missing}, DocSplit::File, 100); }, ErrorKind::Io, {missing});
  expect_error([&] { DocumentReader({dir}, DocSplit::File, 100); }, ErrorKind::Io, {dir});
  expect_error([&] { DocumentReader({}, DocSplit::File, 100); }, ErrorKind::InvalidArgument);
}

TEST(DocumentReader, DocSplitNames) {
  for (const DocSplit split : {DocSplit::File, DocSplit::BlankLine, DocSplit::Line})
    EXPECT_EQ(parse_doc_split(to_string(split)), split);
  expect_error([] { parse_doc_split("paragraph"); }, ErrorKind::InvalidArgument, {"paragraph"});
}

}  // namespace
}  // namespace lab::ch05
