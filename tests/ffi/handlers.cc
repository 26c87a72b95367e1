// XLA FFI handlers for tests/test_ffi.py, written with XLA's C++ bindings (xla/ffi/api/ffi.h)
// as a JAX user writes them; the same library is registered with kiln and with JAX.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Root-mean-square normalisation over the last axis (JAX's FFI guide's example).
static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x,
                              ffi::ResultBuffer<ffi::F32> y) {
  auto dims = x.dimensions();
  if (dims.size() == 0) return ffi::Error::InvalidArgument("rms_norm: x must be an array");
  int64_t n = dims.back(), rows = n ? x.element_count() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x.typed_data() + r * n;
    float* out = y->typed_data() + r * n;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += in[i] * in[i];
    float scale = 1.0f / std::sqrt(sum / n + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale;
  }
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNorm, RmsNormImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// Two results and every kind of attribute: y = x * scale + offset[i % len(offset)],
// n = the number of elements, plus the length of `tag` and the dictionary's "k" value.
static ffi::Error AffineImpl(ffi::Buffer<ffi::F64> x, ffi::ResultBuffer<ffi::F64> y,
                             ffi::ResultBuffer<ffi::S64> n, double scale,
                             ffi::Span<const int64_t> offset, std::string_view tag,
                             ffi::Dictionary extra) {
  auto k = extra.get<int64_t>("k");
  if (k.has_error()) return k.error();
  for (size_t i = 0; i < x.element_count(); ++i)
    y->typed_data()[i] = x.typed_data()[i] * scale + double(offset[i % offset.size()]);
  n->typed_data()[0] = int64_t(x.element_count()) + int64_t(tag.size()) * 1000 + *k * 100000;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Affine, AffineImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::S64>>()
                                  .Attr<double>("scale")
                                  .Attr<ffi::Span<const int64_t>>("offset")
                                  .Attr<std::string_view>("tag")
                                  .Attr<ffi::Dictionary>("extra"));

// Fails when any element is negative.
static ffi::Error CheckedSqrtImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  for (size_t i = 0; i < x.element_count(); ++i) {
    if (x.typed_data()[i] < 0) return ffi::Error::InvalidArgument("negative input to sqrt");
    y->typed_data()[i] = std::sqrt(x.typed_data()[i]);
  }
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(CheckedSqrt, CheckedSqrtImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// Copies its operand's memory to its result as it lies (shows the layouts kiln passes),
// and reports the operand's dimensions in a second result.
static ffi::Error RawCopyImpl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                              ffi::ResultBuffer<ffi::S64> dims) {
  auto d = x.dimensions();
  for (size_t i = 0; i < d.size(); ++i) dims->typed_data()[i] = d[i];
  const char* in = static_cast<const char*>(x.untyped_data());
  char* out = static_cast<char*>(y->untyped_data());
  for (size_t i = 0; i < x.size_bytes(); ++i) out[i] = in[i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RawCopy, RawCopyImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S64>>());

// Adds one in place: its result aliases its operand (input_output_aliases={0: 0}).
static ffi::Error IncrementImpl(ffi::Buffer<ffi::S32> x, ffi::ResultBuffer<ffi::S32> y) {
  for (size_t i = 0; i < y->element_count(); ++i) y->typed_data()[i] += 1;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Increment, IncrementImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

// A stateful handler: instantiate creates a counter per call site, execute returns it and
// counts up (XLA's execution-stage API).
struct Counter {
  static ffi::TypeId id;
  int32_t value = 0;
};
ffi::TypeId Counter::id = {};
static ffi::TypeInfo counter_info = ffi::MakeTypeInfo<Counter>();
// The type's id and info, registered from Python with register_ffi_type.
extern "C" void* CounterTypeId() { return &Counter::id; }
extern "C" void* CounterTypeInfo() { return &counter_info; }

static ffi::ErrorOr<std::unique_ptr<Counter>> CounterInstantiate(int32_t start) {
  auto c = std::make_unique<Counter>();
  c->value = start;
  return c;
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(CounterInit, CounterInstantiate,
                              ffi::Ffi::BindInstantiate().Attr<int32_t>("start"));

static ffi::Error CounterExecute(Counter* c, ffi::ResultBuffer<ffi::S32> out) {
  out->typed_data()[0] = c->value++;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(CounterStep, CounterExecute,
                              ffi::Ffi::Bind().Ctx<ffi::State<Counter>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
