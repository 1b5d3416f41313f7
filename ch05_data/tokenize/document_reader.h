// Streams input files as documents, cut into chunks of about `chunk_bytes` that tokenize independently.
//
// Documents come from --doc-split:
//   file        each file is one document;
//   blank-line  documents are separated by one or more empty lines ("\n\n", "\n\n\n", ...); the separator
//               belongs to no document, and empty lines at the start of a file are dropped;
//   line        each non-empty line is a document, without its "\n".
// A document never spans two files, and empty documents are skipped (they would be a lone end-of-text).
//
// A chunk holds whole documents and, for a document larger than a chunk, pieces of it cut where the
// tokens cannot change (text::last_split_point). Memory stays bounded by a few chunks plus one read block,
// whatever the size of the input; only a document with no such cut point in it (a megabyte without a space
// after a printable ASCII character) is held whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/io/files.h"

namespace lab::ch05 {

enum class DocSplit { File, BlankLine, Line };

DocSplit parse_doc_split(const std::string& name);  // "file" | "blank-line" | "line"; InvalidArgument else
const char* to_string(DocSplit split);

// One stretch of a document inside a chunk's text.
struct DocumentPiece {
  int64_t document = 0;  // index of the document in the whole input, from 0
  bool first = false;    // the document starts here (an end-of-text goes before it)
  size_t offset = 0;     // into TextChunk::text
  size_t size = 0;
};

struct TextChunk {
  std::string text;
  std::vector<DocumentPiece> pieces;
};

class DocumentReader {
 public:
  // Checks up front that every path is a readable regular file (Error(Io) naming it).
  DocumentReader(std::vector<std::string> paths, DocSplit split, size_t chunk_bytes);

  // Fills the next chunk; false once the input is used up.
  bool next(TextChunk* chunk);

  int64_t bytes_read() const { return bytes_read_; }
  int64_t documents() const { return next_document_; }

 private:
  bool advance(TextChunk* chunk);  // moves some input into the chunk; false at the end of all input
  std::string_view pending() const { return std::string_view(buffer_).substr(head_); }
  void read_block();
  void consume(size_t bytes);                 // drops the first bytes of pending()
  void emit(TextChunk* chunk, size_t bytes);  // pending()[0, bytes) joins the current document, then is consumed
  void end_document() { document_open_ = false; }

  std::vector<std::string> paths_;
  DocSplit split_;
  size_t chunk_bytes_;

  size_t next_path_ = 0;
  std::unique_ptr<InputFile> file_;  // the file being read, null between files
  int64_t file_offset_ = 0;
  std::string buffer_;  // bytes of the current file read so far; those from head_ on are not yet consumed
  size_t head_ = 0;
  size_t scan_from_ = 0;        // where the separator search resumes in pending()
  bool skip_newlines_ = false;  // drop '\n' at the front of pending() (start of file, after a separator)
  bool document_open_ = false;  // a piece of the current document was already emitted
  int64_t next_document_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace lab::ch05
