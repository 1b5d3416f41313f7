// DocumentReader: a small state machine over one read buffer per file (see document_reader.h).
#include "ch05_data/tokenize/document_reader.h"

#include <algorithm>

#include "common/core/error.h"
#include "common/text/pretokenizer.h"

namespace lab::ch05 {

namespace {

constexpr size_t kReadBlockBytes = size_t{1} << 20;

}  // namespace

DocSplit parse_doc_split(const std::string& name) {
  if (name == "file") return DocSplit::File;
  if (name == "blank-line") return DocSplit::BlankLine;
  if (name == "line") return DocSplit::Line;
  fail(ErrorKind::InvalidArgument, "unknown document split '", name, "' (file, blank-line or line)");
}

const char* to_string(DocSplit split) {
  switch (split) {
    case DocSplit::File: return "file";
    case DocSplit::BlankLine: return "blank-line";
    case DocSplit::Line: return "line";
  }
  return "?";
}

DocumentReader::DocumentReader(std::vector<std::string> paths, DocSplit split, size_t chunk_bytes)
    : paths_(std::move(paths)), split_(split), chunk_bytes_(std::max<size_t>(chunk_bytes, 1)) {
  LAB_CHECK(!paths_.empty(), InvalidArgument, "no input files");
  for (const auto& path : paths_) InputFile check(path);  // fails early, naming the file
}

bool DocumentReader::next(TextChunk* chunk) {
  chunk->text.clear();
  chunk->pieces.clear();
  while (chunk->text.size() < chunk_bytes_ && advance(chunk)) {
  }
  return !chunk->pieces.empty();
}

void DocumentReader::read_block() {
  buffer_.erase(0, head_);  // drop what was consumed, once per block rather than once per document
  head_ = 0;
  const size_t bytes = static_cast<size_t>(std::min<int64_t>(kReadBlockBytes, file_->size() - file_offset_));
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + bytes);
  file_->read_at(file_offset_, buffer_.data() + old_size, bytes);
  file_offset_ += static_cast<int64_t>(bytes);
  bytes_read_ += static_cast<int64_t>(bytes);
}

void DocumentReader::consume(size_t bytes) {
  head_ += bytes;
  scan_from_ = scan_from_ > bytes ? scan_from_ - bytes : 0;
}

void DocumentReader::emit(TextChunk* chunk, size_t bytes) {
  if (bytes > 0) {
    const int64_t document = document_open_ ? next_document_ - 1 : next_document_++;
    chunk->pieces.push_back(DocumentPiece{document, !document_open_, chunk->text.size(), bytes});
    chunk->text.append(pending().substr(0, bytes));
    document_open_ = true;
  }
  consume(bytes);
}

bool DocumentReader::advance(TextChunk* chunk) {
  if (!file_) {
    if (next_path_ == paths_.size()) return false;
    file_ = std::make_unique<InputFile>(paths_[next_path_++]);
    file_offset_ = 0;
    skip_newlines_ = split_ != DocSplit::File;
  }
  if (skip_newlines_) {
    consume(std::min(pending().find_first_not_of('\n'), pending().size()));
    if (!pending().empty()) skip_newlines_ = false;
  }

  // Where the current document ends in pending(): at a separator, at the end of the file, or not known yet.
  const std::string_view text = pending();
  const std::string_view separator = split_ == DocSplit::BlankLine ? "\n\n" : split_ == DocSplit::Line ? "\n" : "";
  size_t document_end = std::string::npos;
  if (!separator.empty() && !text.empty()) {
    document_end = text.find(separator, scan_from_);
    if (document_end == std::string::npos) scan_from_ = text.size() - std::min(text.size(), separator.size() - 1);
  }
  const bool at_separator = document_end != std::string::npos;
  const bool file_read = file_offset_ == file_->size();
  if (!at_separator && file_read) document_end = text.size();

  // A document longer than a chunk leaves in pieces, each cut where the tokens cannot change: preferably
  // within the first chunk_bytes, else at the last cut point known so far.
  const size_t known = document_end == std::string::npos ? text.size() : document_end;
  if (known > chunk_bytes_) {
    size_t cut = text::last_split_point(text.substr(0, chunk_bytes_ + 1));
    if (cut == 0) cut = text::last_split_point(text.substr(0, known));
    if (cut > 0) {
      emit(chunk, cut);
      return true;
    }
  }
  if (document_end == std::string::npos) {
    read_block();
    return true;
  }
  emit(chunk, document_end);
  end_document();
  if (at_separator) {
    consume(separator.size());
    skip_newlines_ = true;
  } else {
    file_.reset();
  }
  return true;
}

}  // namespace lab::ch05
