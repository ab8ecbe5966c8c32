// ITimingCache (kiln/timing_cache.h) as TensorRT's Python API has it: made by
// IBuilderConfig.create_timing_cache(bytes), set with set_timing_cache, serialize() for a file.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include "bindings.h"
#include "kiln/timing_cache.h"
#include "trt_common.h"

namespace kiln::python {

void bindTrtTimingCache(nb::module_& m) {
  nb::class_<ITimingCache>(m, "ITimingCache",
                           "Tactic times of earlier builds (kiln::ITimingCache).")
      .def(
          "serialize",
          [](const ITimingCache& c) {
            const std::vector<uint8_t> bytes = c.serialize();
            return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          },
          "The cache as bytes, to write to a file and pass to create_timing_cache later.")
      .def(
          "combine",
          [](ITimingCache& c, const ITimingCache& other, bool) {
            c.combine(other);
            return true;
          },
          nb::arg("input_cache"), nb::arg("ignore_mismatch") = false,
          "Adds the other cache's entries this one lacks (entries of other CPUs are kept and never "
          "used here).")
      .def("reset",
           [](ITimingCache& c) {
             c.reset();
             return true;
           })
      .def("__len__", [](const ITimingCache& c) { return c.size(); })
      .def_prop_ro("entries_for_other_cpus", &ITimingCache::entriesForOtherCpus);
}

std::unique_ptr<ITimingCache> timingCacheFromBytes(nb::bytes data) {
  Result<std::unique_ptr<ITimingCache>> cache =
      createTimingCache(data.c_str(), data.size(), "bytes given to create_timing_cache");
  check(cache.status());
  return std::move(*cache);
}

}  // namespace kiln::python
