// The per-device random number generator.
//
// A device RNG kernel never touches the CPU default generator: at launch, on
// the host, it takes a fresh (seed, offset) pair from the device generator
// (advancing the offset), and its worker seeds a private CPU generator from
// that pair. Results are therefore deterministic under manual_seed, and
// independent of which executor thread runs the kernel.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace openreg::backend {

class OpenRegGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit OpenRegGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // State: 16 bytes, the seed then the offset (uint64, native byte order).
  void set_state(const c10::TensorImpl& newState) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // NOLINTNEXTLINE(readability-identifier-naming): torch's check_generator contract
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // A seed for one kernel's private CPU generator; advances the offset.
  // The caller must hold mutex_.
  uint64_t nextKernelSeed();

 private:
  OpenRegGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

// The kernel seed drawn from `generator`, or from the default generator of
// `device` when none is given. Thread-safe.
uint64_t takeKernelSeed(const std::optional<at::Generator>& generator, c10::DeviceIndex device);

}  // namespace openreg::backend
