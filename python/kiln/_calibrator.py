"""INT8 calibrators to subclass in Python, as TensorRT's Python samples do:

    class ImageCalibrator(kiln.IInt8EntropyCalibrator2):
        def __init__(self, batches, cache_file):
            kiln.IInt8EntropyCalibrator2.__init__(self)
            self.batches, self.cache_file = iter(batches), cache_file
        def get_batch_size(self):
            return 1
        def get_batch(self, names):          # one numpy array per input name; None when done
            return next(self.batches, None)
        def read_calibration_cache(self):    # bytes of an earlier calibration, or None
            return open(self.cache_file, "rb").read() if os.path.exists(self.cache_file) else None
        def write_calibration_cache(self, cache):
            open(self.cache_file, "wb").write(cache)

    config.set_flag(kiln.BuilderFlag.INT8)
    config.int8_calibrator = ImageCalibrator(batches, "model.calib")

get_batch may also return host pointers (ints) to data of each input's type and shape, as
TensorRT's samples return device pointers. docs/precision.md describes what calibration does.
"""

from kiln._kiln import CalibrationAlgoType


class IInt8Calibrator:
    """The interface; subclass one of the calibrators below, which say how ranges are chosen."""

    def get_batch_size(self) -> int:
        """Samples per batch (counted in the progress)."""
        raise NotImplementedError

    def get_batch(self, names):
        """A list with one array per input name, or None (or []) when no batch is left."""
        raise NotImplementedError

    def read_calibration_cache(self):
        """bytes (or str) of a cache written by an earlier calibration, or None to calibrate."""
        return None

    def write_calibration_cache(self, cache: bytes) -> None:
        """Called with the cache after calibrating."""

    def get_algorithm(self) -> CalibrationAlgoType:
        raise NotImplementedError


class IInt8EntropyCalibrator2(IInt8Calibrator):
    """Ranges [-T, T] ([0, T] if never negative), T of least KL divergence (TensorRT's entropy calibration)."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8MinMaxCalibrator(IInt8Calibrator):
    """The smallest and largest value seen (asymmetric ranges that hold 0)."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.MINMAX_CALIBRATION


class IInt8PercentileCalibrator(IInt8Calibrator):
    """Ranges as entropy's, T the get_percentile()-th percentile of |x| (kiln's own)."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.PERCENTILE_CALIBRATION

    def get_percentile(self) -> float:
        return 99.99
