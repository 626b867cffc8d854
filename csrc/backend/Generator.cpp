#include "backend/Generator.h"

#include <array>
#include <cstring>
#include <mutex>

#include <ATen/Functions.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include "backend/Device.h"

namespace openreg::backend {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

}  // namespace

OpenRegGeneratorImpl::OpenRegGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(makeDevice(device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)), seed_(seed) {}

void OpenRegGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t OpenRegGeneratorImpl::current_seed() const { return seed_; }

uint64_t OpenRegGeneratorImpl::seed() {
  const uint64_t fresh = c10::detail::getNonDeterministicRandom();
  set_current_seed(fresh);
  return fresh;
}

void OpenRegGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }

uint64_t OpenRegGeneratorImpl::get_offset() const { return offset_; }

void OpenRegGeneratorImpl::set_state(const c10::TensorImpl& newState) {
  TORCH_CHECK(
      newState.dtype() == caffe2::TypeMeta::Make<uint8_t>() && static_cast<size_t>(newState.numel()) == kStateBytes,
      "openreg: RNG state must be a torch.uint8 tensor of ", kStateBytes, " bytes");
  std::array<uint64_t, 2> words{};
  std::memcpy(words.data(), newState.data(), kStateBytes);
  seed_ = words[0];
  offset_ = words[1];
}

c10::intrusive_ptr<c10::TensorImpl> OpenRegGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  const std::array<uint64_t, 2> words{seed_, offset_};
  std::memcpy(state.data_ptr(), words.data(), kStateBytes);
  return state.getIntrusivePtr();
}

uint64_t OpenRegGeneratorImpl::nextKernelSeed() {
  const uint64_t offset = offset_++;
  return splitmix64(seed_ ^ splitmix64(offset));
}

OpenRegGeneratorImpl* OpenRegGeneratorImpl::clone_impl() const {
  auto* copy = new OpenRegGeneratorImpl(device_.index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  // Leaked: generators stay valid during interpreter shutdown.
  static auto* generators = [] {
    auto* all = new std::array<at::Generator, kMaxDevices>();
    for (int i = 0; i < kMaxDevices; ++i) {
      (*all)[i] = at::make_generator<OpenRegGeneratorImpl>(static_cast<c10::DeviceIndex>(i));
    }
    return all;
  }();
  if (device < 0) device = currentDevice();
  checkDeviceIndex(device);
  return (*generators)[device];
}

at::Generator newGenerator(c10::DeviceIndex device) {
  if (device < 0) device = currentDevice();
  checkDeviceIndex(device);
  return at::make_generator<OpenRegGeneratorImpl>(device);
}

uint64_t takeKernelSeed(const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  auto* impl = at::get_generator_or_default<OpenRegGeneratorImpl>(generator, defaultGenerator(device));
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->nextKernelSeed();
}

}  // namespace openreg::backend
