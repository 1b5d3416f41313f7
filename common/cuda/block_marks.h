// The caching allocator's marks for AddressSanitizer: in the sanitized emulation build, the bytes of a block past
// its request and the whole of every free block are not addressable, so that a kernel that runs past its tensor's
// end into the next block of the segment, or uses a tensor after it was freed, is a "use-after-poison" report
// (common/cuda/emulation/addressable.h). In every other build each call does nothing.
//
// When each mark is made, so that no legal use of the memory is reported:
//   - a new segment is marked not addressable at once: nothing is queued on fresh memory;
//   - a block's request becomes addressable at once when the block is handed out, since its new user may touch it
//     from any stream, or from the host, at once (a synchronous copy on another stream is legal at once);
//   - the bytes past the request, and a freed block, become not addressable only once the owner stream has run
//     the work queued on it before: that work may still use them (CUDA's stream-ordered reuse). Such a mark is
//     queued on the owner stream, and bytes handed out again before it runs are cut out of it, because their new
//     user's work may be queued after the mark. A freed block whose owner stream was destroyed (its work has
//     run) is marked at once;
//   - nothing is marked during a capture (the mark would become a node of the graph), nor in private pools:
//     their bytes stay addressable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace lab::cuda {

class BlockMarks {
 public:
  explicit BlockMarks(int device) : device_(device) {}

  // Whether the marks are made in this build (the sanitized emulation build).
  static bool active();

  // A new segment of the ordinary lists: not addressable.
  void on_new_segment(void* base, size_t size);
  // A block of `size` bytes handed to `owner` for a request of `requested` bytes.
  void on_take(void* ptr, size_t requested, size_t size, cudaStream_t owner);
  // A block of `size` bytes freed, its uses on other streams finished; `owner` null: its stream was destroyed.
  void on_free(void* ptr, size_t size, cudaStream_t owner);

 private:
  // Bytes to mark not addressable once a stream reaches the mark: [first, second) ranges.
  struct Mark {
    std::vector<std::pair<char*, char*>> ranges;
  };
  // Queues the mark of [begin, end) on `owner` (at once when owner is null); nothing when it cannot be queued.
  void mark_after_queued_work(char* begin, char* end, cudaStream_t owner);
  // Cuts [begin, end) out of every mark not yet made (mutex_ held).
  void cut(char* begin, char* end);

  const int device_;
  std::mutex mutex_;
  std::list<std::shared_ptr<Mark>> queued_;  // marks queued on a stream and not yet made
};

}  // namespace lab::cuda
