#include "activity_store.h"

#include <optional>

namespace openreg::profiler {
namespace {

using libkineto::ActivityType;

constexpr size_t kBlockBytes = SlabArena::kMaxObjectBytes;
constexpr size_t kShapeCacheSlots = 4096;
constexpr uint32_t kNoShape = UINT32_MAX;

ActivityType kinetoType(TraceEventType type) {
  switch (type) {
    case TraceEventType::Kernel: return ActivityType::CONCURRENT_KERNEL;
    case TraceEventType::Memcpy: return ActivityType::GPU_MEMCPY;
    case TraceEventType::Memset: return ActivityType::GPU_MEMSET;
    // Kineto's only synchronisation type; torch files it under the device.
    case TraceEventType::StreamWait: return ActivityType::CUDA_SYNC;
    case TraceEventType::UserAnnotation: return ActivityType::GPU_USER_ANNOTATION;
    case TraceEventType::Runtime: return ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return ActivityType::CONCURRENT_KERNEL;
}

// The fields that tell a trace's shapes apart most often.
size_t shapeHash(const ActivityShape& s, const char* nameKey) {
  uint64_t h = reinterpret_cast<uintptr_t>(nameKey);
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x9e3779b97f4a7c15ULL; };
  mix(static_cast<uint64_t>(s.type));
  mix(static_cast<uint32_t>(s.device));
  mix(static_cast<uint32_t>(s.resource));
  mix(s.hasFlow + 2u * s.flowStart);
  mix(s.args.stream);
  mix(s.args.bytes);
  mix(s.args.grid[0] + (uint64_t{s.args.block[0]} << 32));
  mix(s.args.eventId);
  return static_cast<size_t>(h ^ (h >> 29));
}

// Appends args as the body of a JSON object, the form metadataJson() has.
class JsonArgs final : public ArgWriter {
 public:
  std::string out;
  void integer(const char* key, int64_t value) override { put(key, std::to_string(value)); }
  void unsignedInteger(const char* key, uint64_t value) override { put(key, std::to_string(value)); }
  void text(const char* key, const char* value) override {
    put(key, std::string("\"") + value + "\"");  // our values are fixed words: nothing to escape
  }
  void json(const char* key, std::string_view value) override { put(key, value); }

 private:
  void put(const char* key, std::string_view value) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += key;
    out += "\": ";
    out += value;
  }
};

// Formats one arg's value, as getMetadataValue returns it (strings unquoted).
class OneArg final : public ArgWriter {
 public:
  explicit OneArg(const std::string& key) : key_(key) {}
  std::optional<std::string> value;
  bool wants(const char* key) override { return !value && key_ == key; }
  void integer(const char* key, int64_t v) override { if (wants(key)) value = std::to_string(v); }
  void unsignedInteger(const char* key, uint64_t v) override { if (wants(key)) value = std::to_string(v); }
  void text(const char* key, const char* v) override { if (wants(key)) value = v; }
  void json(const char* key, std::string_view v) override { if (wants(key)) value = std::string(v); }

 private:
  const std::string& key_;
};

} // namespace

std::string kinetoSafe(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"') {
      c = '\'';
    } else if (c == '\\') {
      c = '/';
    } else if (byte < 0x20 || byte >= 0x7f) {
      c = '?';
    }
  }
  return out;
}

const ActivityShape& OpenregActivity::shape() const { return store_->shapeAt(shape_); }
const std::string OpenregActivity::name() const { return store_->nameAt(shape().name); }
const libkineto::TraceSpan* OpenregActivity::traceSpan() const { return &store_->span(); }

EventArgs OpenregActivity::args() const {
  EventArgs a = shape().args;
  a.correlation = id_;
  const uint64_t length = static_cast<uint64_t>(end_) - static_cast<uint64_t>(start_);
  a.durationNs = length > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(length);
  return a;
}

const std::string OpenregActivity::metadataJson() const {
  JsonArgs json;
  writeArgs(args(), json);
  return json.out;
}

const std::string OpenregActivity::getMetadataValue(const std::string& key) const {
  OneArg one(key);
  writeArgs(args(), one);
  return one.value ? *one.value : std::string();
}

ActivityStore::ActivityStore(const libkineto::TraceSpan& span)
    : GenericTraceActivity(span, ActivityType::OVERHEAD, "openreg activity store"),
      span_(&span),
      shapeCache_(kShapeCacheSlots, kNoShape) {}

ActivityStore::~ActivityStore() {
  // The activities are trivially destroyed: their blocks go back at once.
  for (void* block : blocks_) SlabArena::release(block);
}

void* ActivityStore::allocate(size_t bytes) {
  if (blocks_.empty() || blockUsed_ + bytes > kBlockBytes) {
    blocks_.push_back(arena_.allocate(kBlockBytes));
    blockUsed_ = 0;
  }
  void* object = static_cast<char*>(blocks_.back()) + blockUsed_;
  blockUsed_ += (bytes + alignof(OpenregActivity) - 1) / alignof(OpenregActivity) * alignof(OpenregActivity);
  return object;
}

uint32_t ActivityStore::internName(std::string_view name) {
  auto it = nameByPointer_.find(name.data());
  if (it != nameByPointer_.end() && names_[it->second].size() == name.size()) return it->second;
  const auto index = static_cast<uint32_t>(names_.size());
  names_.push_back(kinetoSafe(name));
  nameByPointer_[name.data()] = index;
  return index;
}

uint32_t ActivityStore::internShape(const ActivityShape& shape, const char* nameKey) {
  uint32_t& slot = shapeCache_[shapeHash(shape, nameKey) % shapeCache_.size()];
  if (slot != kNoShape && shapes_[slot] == shape) return slot;
  slot = static_cast<uint32_t>(shapes_.size());
  shapes_.push_back(shape);
  return slot;
}

const OpenregActivity& ActivityStore::add(const TraceEvent& event, const libkineto::ITraceActivity* linked) {
  ActivityShape shape;
  shape.type = kinetoType(event.type);
  shape.device = static_cast<int32_t>(event.pid);
  shape.resource = static_cast<int32_t>(event.tid);
  shape.onHost = event.type == TraceEventType::Runtime;
  shape.hasFlow = event.flowId != 0;
  shape.flowStart = event.flowStart;
  shape.args = eventArgsOf(event);
  shape.args.correlation = 0;
  shape.args.durationNs = 0;
  // Compared by name pointer first: the name's index is the same for one pointer.
  shape.name = internName(event.name);
  const uint32_t index = internShape(shape, event.name.data());

  int64_t start = event.start;
  int64_t end = event.end;
  int32_t id = event.id;
  if (event.type == TraceEventType::UserAnnotation) {
    // Kineto widens these by 1 ns each side when writing JSON; undo it so
    // the span does not poke out of the work it covers. Its id is the
    // range's own, which Kineto writes as "External id", as for CUDA.
    if (static_cast<uint64_t>(end) - static_cast<uint64_t>(start) >= 2) {  // end >= start
      start += 1;
      end -= 1;
    }
    id = static_cast<int32_t>(event.userRange);
  }
  return *new (allocate(sizeof(OpenregActivity))) OpenregActivity(*this, index, start, end, id, linked);
}

void ActivityStore::doneBuilding() {
  nameByPointer_ = {};
  shapeCache_ = {};
}

} // namespace openreg::profiler
