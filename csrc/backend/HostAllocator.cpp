#include "backend/HostAllocator.h"

#include "backend/Check.h"
#include "backend/Device.h"
#include "backend/Stream.h"

namespace openreg::backend {

namespace {

// Owns one runtime event; the caching template moves these around.
class PinnedUseEvent {
 public:
  PinnedUseEvent() = default;
  explicit PinnedUseEvent(orEvent_t event) : event_(event) {}
  PinnedUseEvent(PinnedUseEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  PinnedUseEvent& operator=(PinnedUseEvent&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  PinnedUseEvent(const PinnedUseEvent&) = delete;
  PinnedUseEvent& operator=(const PinnedUseEvent&) = delete;
  ~PinnedUseEvent() { reset(); }

  orEvent_t get() const { return event_; }

 private:
  void reset() {
    if (event_ != nullptr) orEventDestroy(event_);
    event_ = nullptr;
  }
  orEvent_t event_ = nullptr;
};

using PinnedBlock = at::HostBlock<c10::Stream>;

struct PinnedAllocatorImpl final : public at::CachingHostAllocatorImpl<c10::Stream, PinnedUseEvent, PinnedBlock> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    const orError_t err = orMallocHost(ptr, size);
    if (err == orErrorHostMemoryAllocation || err == orErrorMemoryAllocation) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "openreg: out of pinned host memory allocating ", size,
                       " bytes: ", openreg::describe(err));
    }
    OPENREG_CHECK(err);
  }

  void free_block(PinnedBlock* block) override { orFreeHost(block->ptr_); }

  void record_stream(std::optional<std::vector<PinnedUseEvent>>& events, c10::Stream stream) override {
    DeviceScope scope(stream.device_index());
    orEvent_t event = nullptr;
    OPENREG_CHECK(orEventCreateWithFlags(&event, orEventDisableTiming));
    PinnedUseEvent owned(event);
    OPENREG_CHECK(orEventRecord(event, nativeStream(stream)));
    events->push_back(std::move(owned));
  }

  bool query_event(PinnedUseEvent& event) override { return orEventQuery(event.get()) != orErrorNotReady; }

  c10::Stream get_current_stream() const override { return currentStream(-1); }

  bool stream_is_capturing(c10::Stream /*stream*/) const override { return false; }
};

}  // namespace

DECLARE_HOST_ALLOCATOR(OpenRegPinnedAllocator, PinnedAllocatorImpl, freePinned, g_pinned_allocator)

at::HostAllocator* pinnedAllocator() { return &g_pinned_allocator; }

bool isPinnedPointer(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  orPointerAttributes attributes{};
  if (orPointerGetAttributes(&attributes, ptr) != orSuccess) return false;
  return attributes.type == orMemoryTypeHost;
}

void recordPinnedUse(const c10::DataPtr& data, const c10::Stream& stream) {
  if (data.get_deleter() != &freePinned) return;
  g_pinned_allocator.record_event(data.get(), data.get_context(), stream);
}

}  // namespace openreg::backend

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &openreg::backend::g_pinned_allocator)
