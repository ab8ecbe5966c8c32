#include "build/file_calibrator.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kiln/error.h"
#include "kiln/npy.h"

namespace kiln::build {

namespace fs = std::filesystem;

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `t` with its first dimension dropped at `index` (a view would outlive nothing: copied).
Tensor slice(const Tensor& t, int64_t index) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  Tensor out(t.dtype(), shape);
  const size_t bytes = out.byteSize();
  std::memcpy(out.raw(), static_cast<const uint8_t*>(t.raw()) + bytes * static_cast<size_t>(index),
              bytes);
  return out;
}

}  // namespace

FileCalibrator::FileCalibrator(FileCalibratorOptions options) : options_(std::move(options)) {
  const std::string& path = options_.data;
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_directory()) folders_.push_back(entry.path().string());
    std::sort(folders_.begin(), folders_.end());
    if (folders_.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  path +
                      ": no sample subfolders (calibration data is a folder with one "
                      "subfolder per sample, each holding <input name>.npy)");
    }
    samples_ = static_cast<int64_t>(folders_.size());
  } else if (endsWith(path, ".npz")) {
    for (auto& [name, array] : readNpz(path)) {
      if (array.rank() == 0)
        throw Error(ErrorCode::kInvalidArgument,
                    path + ": array '" + name + "' is a scalar, not a stack of samples");
      if (!stacked_.empty() && array.dim(0) != samples_) {
        throw Error(ErrorCode::kInvalidArgument,
                    path + ": array '" + name + "' stacks " + std::to_string(array.dim(0)) +
                        " samples, the others " + std::to_string(samples_));
      }
      samples_ = array.dim(0);
      stacked_.emplace(name, std::move(array));
    }
    if (samples_ == 0) throw Error(ErrorCode::kInvalidArgument, path + ": holds no samples");
  } else if (!fs::exists(path, ec)) {
    throw Error(ErrorCode::kIoError,
                path + ": no such calibration data (a folder or an .npz file)");
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                path + ": calibration data must be a folder or an .npz file");
  }
}

Tensor FileCalibrator::sample(const CalibrationInput& input, int64_t index) const {
  Tensor t;
  if (!folders_.empty()) {
    const std::string file =
        (fs::path(folders_[static_cast<size_t>(index)]) / (input.name + ".npy")).string();
    if (!fs::exists(file))
      throw Error(ErrorCode::kInvalidArgument,
                  "calibration input '" + input.name + "': " + file + " does not exist");
    t = readNpy(file);
  } else {
    auto it = stacked_.find(input.name);
    if (it == stacked_.end()) {
      std::string held;
      for (const auto& kv : stacked_) held += (held.empty() ? "" : ", ") + kv.first;
      throw Error(ErrorCode::kInvalidArgument, options_.data + ": no array for input '" +
                                                   input.name + "' (it holds " + held + ")");
    }
    t = slice(it->second, index);
  }
  if (t.rank() + 1 == input.dims.size()) {
    Shape shape = t.shape();
    shape.insert(shape.begin(), 1);
    t = t.reshaped(shape);
  }
  return t;
}

bool FileCalibrator::getBatchTensors(const std::vector<CalibrationInput>& inputs,
                                     std::vector<Tensor>& batch) {
  if (next_ >= samples_) return false;
  batch.clear();
  for (const CalibrationInput& in : inputs) batch.push_back(sample(in, next_));
  ++next_;
  return true;
}

const void* FileCalibrator::readCalibrationCache(size_t& length) noexcept {
  length = 0;
  if (options_.cacheFile.empty()) return nullptr;
  std::ifstream in(options_.cacheFile, std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream text;
  text << in.rdbuf();
  cache_ = text.str();
  length = cache_.size();
  return cache_.data();
}

void FileCalibrator::writeCalibrationCache(const void* cache, size_t length) noexcept {
  if (options_.cacheFile.empty()) return;
  std::ofstream out(options_.cacheFile, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(cache), static_cast<std::streamsize>(length));
  if (!out) cacheWriteError_ = options_.cacheFile + ": cannot write the calibration cache";
}

void FileCalibrator::reportProgress(int64_t done, int64_t total, double secondsLeft) noexcept {
  if (!options_.progress) return;
  std::ostringstream line;
  line << "\rcalibrating: " << done << "/" << total << " samples";
  if (secondsLeft >= 0) line << ", ETA " << static_cast<int64_t>(secondsLeft + 0.5) << " s";
  line << "   ";
  if (done >= total) line << "\n";
  std::cerr << line.str() << std::flush;
}

}  // namespace kiln::build
