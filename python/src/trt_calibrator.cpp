#include "trt_calibrator.h"

#include <Python.h>

#include <cstring>

#include <nanobind/stl/string.h>

#include "kiln/error.h"
#include "kiln/session.h"
#include "tensors.h"
#include "trt_common.h"

namespace kiln::python {

PyCalibrator::PyCalibrator(nb::handle calibrator) : calibrator_(nb::borrow(calibrator)) {
  for (const char* method : {"get_batch_size", "get_batch", "read_calibration_cache",
                             "write_calibration_cache", "get_algorithm"}) {
    if (!nb::hasattr(calibrator, method)) {
      throw nb::type_error(
          ("int8_calibrator must be a kiln.IInt8Calibrator (it has no " + std::string(method) + ")")
              .c_str());
    }
  }
  algorithm_ = nb::cast<CalibrationAlgoType>(calibrator.attr("get_algorithm")());
  if (nb::hasattr(calibrator, "get_percentile"))
    percentile_ = nb::cast<double>(calibrator.attr("get_percentile")());
}

PyCalibrator::~PyCalibrator() { releaseAtExit(calibrator_); }

int32_t PyCalibrator::getBatchSize() const noexcept {
  nb::gil_scoped_acquire gil;
  try {
    return nb::cast<int32_t>(calibrator_.attr("get_batch_size")());
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(calibrator_.attr("get_batch_size"));
  } catch (...) {
  }
  return 1;
}

bool PyCalibrator::getBatchTensors(const std::vector<CalibrationInput>& inputs,
                                   std::vector<Tensor>& batch) {
  nb::gil_scoped_acquire gil;
  nb::list names;
  for (const CalibrationInput& in : inputs) names.append(in.name);
  nb::object result;
  try {
    result = calibrator_.attr("get_batch")(names);
  } catch (nb::python_error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("the calibrator's get_batch raised ") + e.what());
  }
  if (result.is_none() || nb::len(result) == 0) return false;
  if (nb::len(result) != inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, "the calibrator's get_batch returned " +
                                                 std::to_string(nb::len(result)) + " values for " +
                                                 std::to_string(inputs.size()) + " inputs");
  }
  batch.clear();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const CalibrationInput& in = inputs[k];
    nb::handle item = result[k];
    if (PyLong_Check(item.ptr())) {  // a host pointer to data of the input's type and shape
      for (int64_t d : in.dims) {
        if (d < 0)
          throw Error(ErrorCode::kInvalidArgument,
                      "calibration input '" + in.name +
                          "': a pointer needs a static shape; return a numpy array");
      }
      Tensor t(in.dtype, in.dims);
      std::memcpy(t.raw(), reinterpret_cast<const void*>(nb::cast<uintptr_t>(item)), t.byteSize());
      batch.push_back(std::move(t));
      continue;
    }
    TensorInfo info;
    info.name = in.name;
    info.dtype = in.dtype;
    info.shape = in.dims;
    info.hasShape = true;
    try {
      batch.push_back(
          tensorFromPython(item, info).clone());  // a copy: kept past this call without the GIL
    } catch (nb::python_error& e) {
      throw Error(ErrorCode::kInvalidArgument, "calibration input '" + in.name + "': " + e.what());
    }
  }
  return true;
}

const void* PyCalibrator::readCalibrationCache(std::size_t& length) noexcept {
  length = 0;
  nb::gil_scoped_acquire gil;
  try {
    nb::object cache = calibrator_.attr("read_calibration_cache")();
    if (cache.is_none()) return nullptr;
    if (nb::isinstance<nb::str>(cache)) {
      cache_ = nb::cast<std::string>(cache);
    } else {
      PyObject* bytes = PyBytes_FromObject(cache.ptr());  // bytes, bytearray, memoryview ...
      if (!bytes) throw nb::python_error();
      nb::bytes held = nb::steal<nb::bytes>(bytes);
      cache_.assign(held.c_str(), held.size());
    }
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(calibrator_.attr("read_calibration_cache"));
    return nullptr;
  } catch (...) {
    return nullptr;
  }
  length = cache_.size();
  return cache_.empty() ? nullptr : cache_.data();
}

void PyCalibrator::writeCalibrationCache(const void* cache, std::size_t length) noexcept {
  nb::gil_scoped_acquire gil;
  try {
    calibrator_.attr("write_calibration_cache")(nb::bytes(static_cast<const char*>(cache), length));
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(calibrator_.attr("write_calibration_cache"));
  } catch (...) {
  }
}

void bindTrtCalibrator(nb::module_& m) {
  nb::enum_<CalibrationAlgoType>(m, "CalibrationAlgoType",
                                 "How INT8 calibration chooses activation ranges.")
      .value("ENTROPY_CALIBRATION_2", CalibrationAlgoType::kENTROPY_CALIBRATION_2,
             "The threshold of least KL divergence (TensorRT's entropy calibration).")
      .value("MINMAX_CALIBRATION", CalibrationAlgoType::kMINMAX_CALIBRATION,
             "The smallest and largest value seen.")
      .value("PERCENTILE_CALIBRATION", CalibrationAlgoType::kPERCENTILE_CALIBRATION,
             "The get_percentile()-th percentile of |x| (kiln's own).");
}

}  // namespace kiln::python
