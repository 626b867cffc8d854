// Random number generation. Each kernel draws a seed from the openreg
// generator on the host (see Generator.h) and fills device memory from a
// private CPU generator seeded with it, on the executor thread.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include "backend/Generator.h"
#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"
#include "backend/aten/KernelProbe.h"

namespace openreg::backend {

namespace {

// Launches `fill(view, generator)` over `self` as kernel `name`.
template <class F>
void launchRandom(const at::Tensor& self, const std::optional<at::Generator>& generator, const std::string& name,
                  int64_t work, F&& fill) {
  c10::DeviceGuard guard(self.device());
  const uint64_t seed = takeKernelSeed(generator, self.device().index());
  launchKernel(streamFor(self), name, elementwiseShape(work),
               [d = describeTensor(self), seed, fill = std::forward<F>(fill)]() {
                 at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(seed);
                 at::Tensor view = d.view();
                 fill(view, cpu);
               });
}

// Whether a fill's refusals depend on its arguments' values (bounds that
// must fit the dtype), not on the dtype alone.
enum class Refusals { ByDtype, ByValues };

// Launches `fill` as launchRandom does, after raising, at the call, what
// CPU's fill refuses (a dtype it lacks, bounds the dtype cannot hold): a dry
// run on one element. For fills that read nothing but their scalar captures.
template <class F>
void launchScalarFill(const at::Tensor& self, const std::optional<at::Generator>& generator, const std::string& name,
                      F&& fill, Refusals refusals = Refusals::ByDtype) {
  probeOnOneElement(
      name.c_str(), self.scalar_type(),
      [&fill](at::Tensor& one) {
        at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(0);
        fill(one, cpu);
      },
      refusals == Refusals::ByDtype);
  launchRandom(self, generator, name, self.numel(), std::forward<F>(fill));
}

at::Tensor& uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (self.numel() == 0) return self;
  launchScalarFill(
      self, generator, kernelName("rng_uniform", self.scalar_type()),
      [from, to](at::Tensor& view, at::Generator& g) { view.uniform_(from, to, g); }, Refusals::ByValues);
  return self;
}

at::Tensor& normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_normal", self.scalar_type()),
                   [mean, std](at::Tensor& view, at::Generator& g) { view.normal_(mean, std, g); });
  return self;
}

at::Tensor& randomFull(at::Tensor& self, std::optional<at::Generator> generator) {
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_random", self.scalar_type()),
                   [](at::Tensor& view, at::Generator& g) { view.random_(g); });
  return self;
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  TORCH_CHECK(to > 0, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
  if (self.numel() == 0) return self;
  launchScalarFill(
      self, generator, kernelName("rng_random", self.scalar_type()),
      [to](at::Tensor& view, at::Generator& g) { view.random_(to, g); }, Refusals::ByValues);
  return self;
}

at::Tensor& randomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                       std::optional<at::Generator> generator) {
  TORCH_CHECK(!to.has_value() || from < *to, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", *to);
  if (self.numel() == 0) return self;
  launchScalarFill(
      self, generator, kernelName("rng_random", self.scalar_type()),
      [from, to](at::Tensor& view, at::Generator& g) { view.random_(from, to, g); }, Refusals::ByValues);
  return self;
}

at::Tensor& bernoulliFloat(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_bernoulli", self.scalar_type()),
                   [p](at::Tensor& view, at::Generator& g) { view.bernoulli_(p, g); });
  return self;
}

at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator) {
  TORCH_CHECK(p.device() == self.device() || (p.device().is_cpu() && p.dim() == 0),
              "Expected all tensors to be on the same device, but found at least two devices, ", self.device(), " and ",
              p.device(), "!");
  if (self.numel() == 0) return self;
  if (!p.device().is_privateuseone()) return bernoulliFloat(self, p.item<double>(), generator);
  TORCH_CHECK(at::infer_size(self.sizes(), p.sizes()) == self.sizes(), "bernoulli_: probability of shape ", p.sizes(),
              " cannot be broadcast to ", self.sizes());
  // The dtypes CPU's kernel refuses (of self or of p) raise here.
  probeOnOneElement((std::string("rng_bernoulli_p_") + c10::toString(p.scalar_type())).c_str(), self.scalar_type(),
                    [pType = p.scalar_type()](at::Tensor& one) {
                      at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(0);
                      one.bernoulli_(at::zeros({1}, at::TensorOptions().dtype(pType)), cpu);
                    });
  launchRandom(self, generator, kernelName("rng_bernoulli", self.scalar_type()), self.numel(),
               [pd = describeTensor(p)](at::Tensor& view, at::Generator& g) { view.bernoulli_(pd.view(), g); });
  return self;
}

at::Tensor& exponential(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_exponential", self.scalar_type()),
                   [lambd](at::Tensor& view, at::Generator& g) { view.exponential_(lambd, g); });
  return self;
}

at::Tensor& geometric(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_geometric", self.scalar_type()),
                   [p](at::Tensor& view, at::Generator& g) { view.geometric_(p, g); });
  return self;
}

at::Tensor& logNormal(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_log_normal", self.scalar_type()),
                   [mean, std](at::Tensor& view, at::Generator& g) { view.log_normal_(mean, std, g); });
  return self;
}

at::Tensor& cauchy(at::Tensor& self, double median, double sigma, std::optional<at::Generator> generator) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  if (self.numel() == 0) return self;
  launchScalarFill(self, generator, kernelName("rng_cauchy", self.scalar_type()),
                   [median, sigma](at::Tensor& view, at::Generator& g) { view.cauchy_(median, sigma, g); });
  return self;
}

// Dropout: a Bernoulli(1 - p) keep-mask and the scaled product, one kernel.
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  c10::DeviceGuard guard(input.device());
  if (input.numel() == 0) return {input, at::empty_like(input, input.options().dtype(at::kBool))};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor output = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool), at::MemoryFormat::Contiguous);
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  launchRandom(
      mask, std::nullopt, kernelName("dropout_fwd", input.scalar_type()), input.numel(),
      [in = describeTensor(input), out = describeTensor(output), keep, scale](at::Tensor& maskView, at::Generator& g) {
        maskView.bernoulli_(keep, g);
        at::Tensor outView = out.view();
        at::mul_out(outView, in.view(), maskView);
        outView.mul_(scale);
      });
  return {output, mask};
}

at::Tensor& randpermOut(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  c10::DeviceGuard guard(out.device());
  // CPU's refusals: n beyond what the dtype counts exactly, a dtype it lacks.
  at::native::check_supported_max_int_with_precision(n, at::empty({0}, at::TensorOptions().dtype(out.scalar_type())));
  probeOnOneElement("rng_randperm", out.scalar_type(), [](at::Tensor& one) {
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(0);
    at::randperm_out(one, 1, cpu);
  });
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  launchRandom(out, generator, kernelName("rng_randperm", out.scalar_type()), n,
               [n](at::Tensor& view, at::Generator& g) { at::randperm_out(view, n, g); });
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t numSamples, bool replacement,
                       std::optional<at::Generator> generator) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(numSamples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.size(-1);
  TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  TORCH_CHECK(replacement || numSamples <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = self.dim() == 1 ? at::empty({numSamples}, self.options().dtype(at::kLong))
                                   : at::empty({self.size(0), numSamples}, self.options().dtype(at::kLong));
  launchRandom(out, generator, kernelName("rng_multinomial", self.scalar_type()), out.numel(),
               [probs = describeTensor(self), numSamples, replacement](at::Tensor& view, at::Generator& g) {
                 at::multinomial_out(view, probs.view(), numSamples, replacement, g);
               });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform));
  m.impl("normal_", TORCH_FN(normal));
  m.impl("random_", TORCH_FN(randomFull));
  m.impl("random_.to", TORCH_FN(randomTo));
  m.impl("random_.from", TORCH_FN(randomFrom));
  m.impl("bernoulli_.float", TORCH_FN(bernoulliFloat));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulliTensor));
  m.impl("exponential_", TORCH_FN(exponential));
  m.impl("geometric_", TORCH_FN(geometric));
  m.impl("log_normal_", TORCH_FN(logNormal));
  m.impl("cauchy_", TORCH_FN(cauchy));
  m.impl("native_dropout", TORCH_FN(nativeDropout));
  m.impl("randperm.generator_out", TORCH_FN(randpermOut));
  m.impl("multinomial", TORCH_FN(multinomial));
  for (const auto& [op, kernel] :
       std::initializer_list<std::pair<const char*, const char*>>{{"uniform_", "rng_uniform"},
                                                                  {"normal_", "rng_normal"},
                                                                  {"random_", "rng_random"},
                                                                  {"random_.to", "rng_random"},
                                                                  {"random_.from", "rng_random"},
                                                                  {"bernoulli_.float", "rng_bernoulli"},
                                                                  {"bernoulli_.Tensor", "rng_bernoulli"},
                                                                  {"exponential_", "rng_exponential"},
                                                                  {"geometric_", "rng_geometric"},
                                                                  {"log_normal_", "rng_log_normal"},
                                                                  {"cauchy_", "rng_cauchy"},
                                                                  {"native_dropout", "dropout_fwd"},
                                                                  {"randperm.generator_out", "rng_randperm"},
                                                                  {"multinomial", "rng_multinomial"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::Device, kernel);
  }
}

}  // namespace openreg::backend
