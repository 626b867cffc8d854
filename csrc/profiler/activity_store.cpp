#include "activity_store.h"

#include <optional>

#include "openreg/common/json_writer.h"

namespace openreg::profiler {
namespace {

using libkineto::ActivityType;

// 32 blocks fill a slab exactly (its first 16 bytes are the slab's own).
constexpr size_t kBlockBytes = (SlabArena::kSlabBytes - 16) / 32 / 16 * 16;
static_assert(kBlockBytes <= SlabArena::kMaxObjectBytes && kBlockBytes % 16 == 0);
constexpr size_t kShapeCacheSlots = 4096;  // a power of two
static_assert((kShapeCacheSlots & (kShapeCacheSlots - 1)) == 0);
constexpr uint32_t kNoShape = UINT32_MAX;

ActivityType kinetoType(TraceEventType type) {
  switch (type) {
    case TraceEventType::Kernel:
      return ActivityType::CONCURRENT_KERNEL;
    case TraceEventType::Memcpy:
      return ActivityType::GPU_MEMCPY;
    case TraceEventType::Memset:
      return ActivityType::GPU_MEMSET;
    // Kineto's only synchronisation type; torch files it under the device.
    case TraceEventType::StreamWait:
    case TraceEventType::HostSync:
      return ActivityType::CUDA_SYNC;
    case TraceEventType::UserAnnotation:
      return ActivityType::GPU_USER_ANNOTATION;
    case TraceEventType::Runtime:
      return ActivityType::PRIVATEUSE1_RUNTIME;
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

// Args as the body of a JSON object, the form metadataJson() has, laid out
// as Kineto lays out its own ("key": value, joined by ", "): torch's tests
// and trace exporter compare the text.
class JsonArgs final : public ArgWriter {
 public:
  JsonArgs() : json_(common::JsonWriter::Layout::Spaced) { json_.beginObject(); }
  void integer(const char* key, int64_t value) override { json_.field(key, value); }
  void unsignedInteger(const char* key, uint64_t value) override { json_.field(key, value); }
  void text(const char* key, const char* value) override { json_.field(key, value); }
  void boolean(const char* key, bool value) override { json_.field(key, value); }
  void decimal(const char* key, double value, int decimals) override { json_.key(key).valueFixed(value, decimals); }
  void dims(const char* key, const uint32_t (&value)[3]) override {
    json_.key(key).beginArray().value(value[0]).value(value[1]).value(value[2]).endArray();
  }
  void members(const char* json) override { members_ = json; }
  // What is inside the braces: Kineto writes the braces.
  std::string body() {
    json_.endObject();
    const std::string& all = json_.str();
    std::string inner = all.substr(1, all.size() - 2);
    if (members_ != nullptr) inner.append(inner.empty() ? "" : ", ").append(members_);
    return inner;
  }

 private:
  common::JsonWriter json_;
  const char* members_ = nullptr;
};

// Formats one arg's value, as getMetadataValue returns it (strings unquoted).
class OneArg final : public ArgWriter {
 public:
  explicit OneArg(const std::string& key) : key_(key) {}
  std::optional<std::string> value;
  void integer(const char* key, int64_t v) override {
    if (wanted(key)) value = std::to_string(v);
  }
  void unsignedInteger(const char* key, uint64_t v) override {
    if (wanted(key)) value = std::to_string(v);
  }
  void text(const char* key, const char* v) override {
    if (wanted(key)) value = v;
  }
  void boolean(const char* key, bool v) override {
    if (wanted(key)) value = v ? "true" : "false";
  }
  void decimal(const char* key, double v, int decimals) override {
    if (wanted(key)) value = decimalText(v, decimals);
  }
  void dims(const char* key, const uint32_t (&v)[3]) override {
    if (wanted(key)) value = dimsText(v);
  }
  // An annotation's members are not looked up one by one.
  void members(const char* /*json*/) override {}

 private:
  bool wanted(const char* key) const { return !value && key_ == key; }
  const std::string& key_;
};

}  // namespace

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

// The store whose arena holds the activity (ActivityStore::allocate).
const ActivityStore& OpenregActivity::store() const {
  return *static_cast<const ActivityStore*>(SlabArena::ownerOf(this));
}
const ActivityShape& OpenregActivity::shape() const { return store().shapeAt(shape_); }
const std::string OpenregActivity::name() const { return store().nameAt(shape().name); }
const libkineto::TraceSpan* OpenregActivity::traceSpan() const { return &store().span(); }

EventArgs OpenregActivity::args() const {
  EventArgs a = shape().args;
  a.correlation = id_;
  const uint64_t length = static_cast<uint64_t>(end_) - static_cast<uint64_t>(start_);
  a.durationNs = length > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(length);
  return a;
}

void OpenregActivity::writeAllArgs(ArgWriter& out) const {
  const EventArgs a = args();
  writeArgs(a, out);
  if (const KernelMetrics* metrics = store().kernelMetricsOf(*this)) {
    writeKernelMetricArgs(*metrics, store().metricsRequest(), a.durationNs, out);
  }
}

const std::string OpenregActivity::metadataJson() const {
  JsonArgs json;
  writeAllArgs(json);
  return json.body();
}

// Sync rows are not "hidden": torch lists them in prof.events() as the trace does (torch_openreg/_profiler.py
// keeps their span out of the device time).
const std::string OpenregActivity::getMetadataValue(const std::string& key) const {
  OneArg one(key);
  writeAllArgs(one);
  return one.value ? *one.value : std::string();
}

ActivityStore::ActivityStore(const libkineto::TraceSpan& span)
    : GenericTraceActivity(span, ActivityType::OVERHEAD, "openreg activity store"),
      span_(&span),
      arena_(this),
      shapeCache_(kShapeCacheSlots, kNoShape) {
  lastShape_.fill(kNoShape);
}

ActivityStore::~ActivityStore() {
  // The activities are trivially destroyed: their blocks go back at once.
  for (void* block : blocks_) SlabArena::release(block);
}

static_assert(sizeof(OpenregActivity) == 40, "two per kernel: keep it small");

void* ActivityStore::allocate(size_t bytes) {
  if (blocks_.empty() || blockUsed_ + bytes > kBlockBytes) {
    blocks_.push_back(arena_.allocate(kBlockBytes));
    blockUsed_ = 0;
  }
  void* object = static_cast<char*>(blocks_.back()) + blockUsed_;
  blockUsed_ += (bytes + alignof(OpenregActivity) - 1) / alignof(OpenregActivity) * alignof(OpenregActivity);
  return object;
}

uint32_t ActivityStore::internName(std::string_view name, EventArgs::Source source) {
  // Events of one source mostly repeat the name before (a kernel, its launch).
  LastName& last = lastName_[static_cast<size_t>(source)];
  if (last.pointer == name.data() && last.size == name.size()) return last.index;
  last = {name.data(), name.size(), internNameSlow(name)};
  return last.index;
}

uint32_t ActivityStore::internNameSlow(std::string_view name) {
  auto it = nameByPointer_.find(name.data());
  if (it != nameByPointer_.end() && names_[it->second].size() == name.size()) return it->second;
  const auto index = static_cast<uint32_t>(names_.size());
  names_.push_back(kinetoSafe(name));
  nameByPointer_[name.data()] = index;
  return index;
}

const char* ActivityStore::keepAnnotation(const char* runtimeOwned) {
  // Runtime strings may go with the library; the trace may be written later.
  auto [it, added] = annotationByPointer_.try_emplace(runtimeOwned, nullptr);
  if (added) it->second = annotations_.emplace_back(runtimeOwned).c_str();
  return it->second;
}

uint32_t ActivityStore::internShape(const ActivityShape& shape, const char* nameKey) {
  // As names: the shape before of the same source first, then the cache.
  uint32_t& last = lastShape_[static_cast<size_t>(shape.args.source)];
  if (last != kNoShape && shapes_[last] == shape) return last;
  uint32_t& slot = shapeCache_[shapeHash(shape, nameKey) & (kShapeCacheSlots - 1)];
  if (slot == kNoShape || !(shapes_[slot] == shape)) {
    slot = static_cast<uint32_t>(shapes_.size());
    shapes_.push_back(shape);
  }
  last = slot;
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
  if (shape.args.communication != nullptr) {
    // The record set goes before Kineto writes the trace: keep a copy.
    communications_.push_back(*shape.args.communication);
    shape.args.communication = &communications_.back();
  }
  if (shape.args.annotation != nullptr) shape.args.annotation = keepAnnotation(shape.args.annotation);
  shape.args.correlation = 0;
  shape.args.durationNs = 0;
  // Compared by name pointer first: the name's index is the same for one pointer.
  shape.name = internName(event.name, shape.args.source);
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
  return *new (allocate(sizeof(OpenregActivity))) OpenregActivity(index, start, end, id, linked);
}

void ActivityStore::attachKernelMetrics(const OpenregActivity& kernel, const KernelMetrics& metrics) {
  kernelMetrics_[&kernel] = metrics;
}

const KernelMetrics* ActivityStore::kernelMetricsOf(const OpenregActivity& kernel) const {
  if (kernelMetrics_.empty()) return nullptr;
  const auto it = kernelMetrics_.find(&kernel);
  return it != kernelMetrics_.end() ? &it->second : nullptr;
}

void ActivityStore::doneBuilding() {
  nameByPointer_ = {};
  shapeCache_ = {};
  lastName_ = {};
  lastShape_.fill(kNoShape);
}

}  // namespace openreg::profiler
