#include "tensors.h"

#include <Python.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include <nanobind/stl/string.h>

namespace kiln::python {

namespace {

// numpy's objects, looked up once (with the GIL held) and kept for the interpreter's life.
struct Numpy {
  nb::object asarray;
  nb::object array;
  nb::object ndarrayType;
  nb::object genericType;  // numpy scalars
  nb::object objectDtype;
};

const Numpy& numpy() {
  static const Numpy* cached = [] {
    nb::module_ np = nb::module_::import_("numpy");
    return new Numpy{np.attr("asarray"), np.attr("array"), np.attr("ndarray"), np.attr("generic"),
                     np.attr("dtype")("object")};
  }();
  return *cached;
}

// Element types numpy has no dtype of its own for: ml_dtypes provides them, one byte (or two,
// for bfloat16) per element, the same bits as a kiln Tensor holds.
struct ExtensionType {
  DataType dtype;
  const char* mlDtypesName;
};

constexpr std::array<ExtensionType, 11> kExtensionTypes{{
    {DataType::kBFloat16, "bfloat16"},
    {DataType::kFloat8E4M3FN, "float8_e4m3fn"},
    {DataType::kFloat8E4M3FNUZ, "float8_e4m3fnuz"},
    {DataType::kFloat8E5M2, "float8_e5m2"},
    {DataType::kFloat8E5M2FNUZ, "float8_e5m2fnuz"},
    {DataType::kUint4, "uint4"},
    {DataType::kInt4, "int4"},
    {DataType::kFloat4E2M1, "float4_e2m1fn"},
    {DataType::kFloat8E8M0, "float8_e8m0fnu"},
    {DataType::kUint2, "uint2"},
    {DataType::kInt2, "int2"},
}};

const ExtensionType* extensionTypeOf(DataType dtype) {
  for (const auto& e : kExtensionTypes)
    if (e.dtype == dtype) return &e;
  return nullptr;
}

// The numpy dtype an extension type's bits travel as.
const char* storageDtypeName(DataType dtype) {
  return dtype == DataType::kBFloat16 ? "uint16" : "uint8";
}

nb::object mlDtype(const ExtensionType& e) {
  try {
    return nb::module_::import_("ml_dtypes").attr(e.mlDtypesName);
  } catch (const nb::python_error&) {
    throw std::runtime_error(std::string("kiln: tensors of type ") + e.mlDtypesName +
                             " need the ml_dtypes package (pip install ml_dtypes)");
  }
}

// ---- numpy -> Tensor -----------------------------------------------------------------------

// A Py_buffer held by a Tensor that views it; released with the GIL, whichever thread drops it.
struct HeldBuffer {
  Py_buffer view{};
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(&view);
  }
};

DataType integerType(bool isSigned, Py_ssize_t size) {
  switch (size) {
    case 1:
      return isSigned ? DataType::kInt8 : DataType::kUint8;
    case 2:
      return isSigned ? DataType::kInt16 : DataType::kUint16;
    case 4:
      return isSigned ? DataType::kInt32 : DataType::kUint32;
    case 8:
      return isSigned ? DataType::kInt64 : DataType::kUint64;
    default:
      return DataType::kUndefined;
  }
}

// The dtype of a buffer's struct-module format ("<f", "q", "?"); kUndefined for anything else
// (strings, objects, records, big-endian data).
DataType dtypeOfFormat(const char* format, Py_ssize_t itemsize) {
  if (!format) return DataType::kUint8;
  if (*format == '<' || *format == '=' || *format == '@') ++format;
  if (format[0] == '\0' || format[1] != '\0') return DataType::kUndefined;
  switch (format[0]) {
    case '?':
      return DataType::kBool;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n':
      return integerType(true, itemsize);
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
      return integerType(false, itemsize);
    case 'e':
      return DataType::kFloat16;
    case 'f':
      return DataType::kFloat32;
    case 'd':
      return DataType::kFloat64;
    default:
      return DataType::kUndefined;
  }
}

bool isCContiguous(const Py_buffer& view) {
  Py_ssize_t expected = view.itemsize;
  for (int i = view.ndim - 1; i >= 0; --i) {
    if (view.shape[i] != 1 && view.strides[i] != expected) return false;
    expected *= view.shape[i];
  }
  return true;
}

void copyStrided(char* dst, const char* src, const Py_buffer& view, int dim) {
  if (view.ndim == 0) {
    std::memcpy(dst, src, static_cast<size_t>(view.itemsize));
    return;
  }
  const Py_ssize_t n = view.shape[dim];
  const Py_ssize_t stride = view.strides[dim];
  if (dim == view.ndim - 1) {
    for (Py_ssize_t i = 0; i < n; ++i)
      std::memcpy(dst + i * view.itemsize, src + i * stride, static_cast<size_t>(view.itemsize));
    return;
  }
  Py_ssize_t inner = view.itemsize;
  for (int d = dim + 1; d < view.ndim; ++d) inner *= view.shape[d];
  for (Py_ssize_t i = 0; i < n; ++i) copyStrided(dst + i * inner, src + i * stride, view, dim + 1);
}

// The tensor of a numeric buffer of `dtype`: the buffer itself when C-contiguous and aligned,
// else a copy in C order.
Tensor tensorOfBuffer(std::unique_ptr<HeldBuffer> held, DataType dtype) {
  const Py_buffer& view = held->view;
  Shape shape(view.shape, view.shape + view.ndim);
  const bool aligned =
      reinterpret_cast<uintptr_t>(view.buf) % static_cast<uintptr_t>(view.itemsize) == 0;
  if (aligned && isCContiguous(view)) {
    void* data = view.buf;
    return Tensor::wrap(dtype, std::move(shape), data,
                        std::shared_ptr<const void>(std::move(held)));
  }
  Tensor copy(dtype, std::move(shape));
  if (copy.numel() > 0)
    copyStrided(static_cast<char*>(copy.raw()), static_cast<const char*>(view.buf), view, 0);
  return copy;
}

std::unique_ptr<HeldBuffer> getBuffer(nb::handle array) {
  auto held = std::make_unique<HeldBuffer>();
  // On failure the view stays empty (obj null), which PyBuffer_Release ignores.
  if (PyObject_GetBuffer(array.ptr(), &held->view, PyBUF_RECORDS_RO) != 0) return nullptr;
  return held;
}

// str(value), as Python prints it.
// str(value), as Python prints it (nb::str of a non-str handle does not convert it).
std::string strOf(nb::handle value) { return nb::cast<std::string>(value.attr("__str__")()); }

std::string typeNameOf(nb::handle value) {
  return nb::borrow<nb::str>(nb::type_name(value.type())).c_str();
}

[[noreturn]] void unsupportedArray(nb::handle array, const std::string& inputName,
                                   const std::string& why) {
  const std::string dtype = strOf(array.attr("dtype"));
  throw std::runtime_error("input '" + inputName + "': a numpy array of dtype " + dtype + " " +
                           why);
}

// `expected`: the input's element type. For an input that is not a string, the tensor is left
// empty: Session::run then refuses its type, as onnxruntime does for object arrays.
Tensor stringTensorOf(nb::handle array, const std::string& inputName, DataType expected) {
  nb::tuple shapeTuple = nb::borrow<nb::tuple>(array.attr("shape"));
  Shape shape;
  for (nb::handle d : shapeTuple) shape.push_back(nb::cast<int64_t>(d));
  Tensor t(DataType::kString, shape);
  if (expected != DataType::kUndefined && expected != DataType::kString) return t;
  nb::object flat = array.attr("ravel")().attr("tolist")();
  auto* out = t.data<std::string>();
  size_t i = 0;
  for (nb::handle item : flat) {
    if (PyUnicode_Check(item.ptr())) {
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
      if (!utf8) throw nb::python_error();
      out[i].assign(utf8, static_cast<size_t>(size));
    } else if (PyBytes_Check(item.ptr())) {
      out[i].assign(PyBytes_AS_STRING(item.ptr()),
                    static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    } else {
      throw std::runtime_error("input '" + inputName + "': element " + std::to_string(i) +
                               " of the string array is a " + typeNameOf(item) +
                               ", not a str or bytes");
    }
    ++i;
  }
  return t;
}

// Any numpy array: numeric through the buffer protocol, strings element by element, ml_dtypes
// types through a view of their bits.
Tensor tensorOfArray(nb::handle array, const TensorInfo& info) {
  const std::string& inputName = info.name;
  if (auto held = getBuffer(array)) {
    const DataType dtype = dtypeOfFormat(held->view.format, held->view.itemsize);
    if (dtype != DataType::kUndefined) return tensorOfBuffer(std::move(held), dtype);
  } else {
    PyErr_Clear();  // numpy refuses a buffer for ml_dtypes' types
  }
  nb::object dtype = array.attr("dtype");
  const std::string kind = strOf(dtype.attr("kind"));
  if (kind == "U" || kind == "S" || kind == "O")
    return stringTensorOf(array, inputName, info.dtype);
  const std::string name = strOf(dtype.attr("name"));
  for (const auto& e : kExtensionTypes) {
    if (name != e.mlDtypesName) continue;
    auto held = getBuffer(array.attr("view")(storageDtypeName(e.dtype)));
    if (!held) throw nb::python_error();
    return tensorOfBuffer(std::move(held), e.dtype);
  }
  if (!nb::cast<bool>(dtype.attr("isnative")))
    unsupportedArray(array, inputName,
                     "is not in the machine's byte order; convert it with astype");
  unsupportedArray(array, inputName, "has no kiln element type");
}

bool isNumberLike(nb::handle value) {
  return PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr()) || PyBool_Check(value.ptr()) ||
         PyComplex_Check(value.ptr()) ||
         PyObject_IsInstance(value.ptr(), numpy().genericType.ptr()) == 1;
}

nb::object numpyDtypeOf(DataType dtype) {
  if (const ExtensionType* e = extensionTypeOf(dtype)) return mlDtype(*e);
  if (dtype == DataType::kString) return numpy().objectDtype;
  return nb::str(dataTypeName(dtype).c_str());
}

}  // namespace

Tensor tensorFromPython(nb::handle value, const TensorInfo& info) {
  if (info.mapKeyType != DataType::kUndefined)
    throw std::runtime_error("input '" + info.name +
                             "' is a sequence of maps; kiln does not read maps");
  if (PyObject_IsInstance(value.ptr(), numpy().ndarrayType.ptr()) == 1)
    return tensorOfArray(value, info);
  if (value.is_none() && info.isOptionalType) return Tensor::none(info.dtype, info.isSequence);
  if (PyList_Check(value.ptr())) {
    if (info.isSequence) {
      TensorInfo item = info;
      item.isSequence = item.isOptionalType = false;
      std::vector<Tensor> items;
      for (nb::handle v : nb::borrow<nb::list>(value)) items.push_back(tensorFromPython(v, item));
      return Tensor::sequence(info.dtype, std::move(items));
    }
    // As ONNX Runtime does: a list becomes an array of the input's element type.
    if (info.dtype != DataType::kUndefined)
      return tensorOfArray(numpy().array(value, numpyDtypeOf(info.dtype)), info);
  }
  if (isNumberLike(value))
    throw std::runtime_error(std::string("Unable to handle object of type ") +
                             nb::repr(value.type()).c_str());
  throw std::runtime_error(
      "Input must be a list of dictionaries or a single numpy array for input '" + info.name +
      "'.");
}

// ---- Tensor -> numpy -----------------------------------------------------------------------

namespace {

// What numpy's outputs view: a Tensor, exported through the buffer protocol.
struct TensorBuffer {
  Tensor tensor;
  std::vector<Py_ssize_t> shape;
  std::vector<Py_ssize_t> strides;
  const char* format = nullptr;
  Py_ssize_t itemsize = 0;

  TensorBuffer(Tensor t, const char* fmt, Py_ssize_t size)
      : tensor(std::move(t)), format(fmt), itemsize(size) {
    shape.assign(tensor.shape().begin(), tensor.shape().end());
    strides.resize(shape.size());
    Py_ssize_t stride = itemsize;
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= shape[i];
    }
  }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(tensor.raw()); }
};

const char* bufferFormatOf(DataType dtype) {
  switch (dtype) {
    case DataType::kBool:
      return "?";
    case DataType::kInt8:
      return "b";
    case DataType::kUint8:
      return "B";
    case DataType::kInt16:
      return "h";
    case DataType::kUint16:
      return "H";
    case DataType::kInt32:
      return "i";
    case DataType::kUint32:
      return "I";
    case DataType::kInt64:
      return "q";
    case DataType::kUint64:
      return "Q";
    case DataType::kFloat16:
      return "e";
    case DataType::kFloat32:
      return "f";
    case DataType::kFloat64:
      return "d";
    default:
      return extensionTypeOf(dtype) ? (dtype == DataType::kBFloat16 ? "H" : "B") : nullptr;
  }
}

int tensorBufferGet(PyObject* self, Py_buffer* view, int flags) {
  TensorBuffer* b = nb::inst_ptr<TensorBuffer>(self);
  view->obj = Py_NewRef(self);
  view->buf = b->tensor.raw();
  view->len = static_cast<Py_ssize_t>(b->tensor.byteSize());
  view->readonly = 0;
  view->itemsize = b->itemsize;
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(b->format) : nullptr;
  view->ndim = static_cast<int>(b->shape.size());
  view->shape = b->shape.data();
  view->strides = b->strides.data();
  view->suboffsets = nullptr;
  view->internal = nullptr;
  return 0;
}

PyType_Slot tensorBufferSlots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(tensorBufferGet)},
                                   {0, nullptr}};

nb::object stringArrayOf(const Tensor& t) {
  nb::list items;
  const auto* s = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    // surrogateescape: bytes that are not UTF-8 come back as they went in.
    PyObject* str =
        PyUnicode_DecodeUTF8(s[i].data(), static_cast<Py_ssize_t>(s[i].size()), "surrogateescape");
    if (!str) throw nb::python_error();
    items.append(nb::steal(str));
  }
  nb::list shape;
  for (int64_t d : t.shape()) shape.append(d);
  return numpy().array(items, numpy().objectDtype).attr("reshape")(nb::tuple(shape));
}

// A map as ONNX Runtime returns ZipMap's: a dict of int or str keys to Python floats.
nb::object mapToPython(const Tensor& map) {
  const Tensor& keys = map.mapKeys();
  const Tensor& values = map.mapValues();
  nb::dict dict;
  for (int64_t i = 0; i < keys.numel(); ++i) {
    nb::object key = keys.dtype() == DataType::kString
                         ? nb::object(nb::str(keys.data<std::string>()[i].c_str(),
                                              keys.data<std::string>()[i].size()))
                         : nb::object(nb::int_(keys.data<int64_t>()[i]));
    dict[key] = nb::float_(values.doubleAt(i));
  }
  return std::move(dict);
}

}  // namespace

nb::object tensorToPython(const Tensor& tensor) {
  if (tensor.isNone()) return nb::none();
  if (tensor.isMap()) return mapToPython(tensor);
  if (tensor.isSequence()) {
    nb::list items;
    for (const Tensor& item : tensor.sequenceItems()) items.append(tensorToPython(item));
    return std::move(items);
  }
  if (tensor.dtype() == DataType::kString) return stringArrayOf(tensor);
  const char* format = bufferFormatOf(tensor.dtype());
  if (!format)
    throw std::runtime_error("kiln: no numpy dtype for an output of type " +
                             dataTypeName(tensor.dtype()));
  const ExtensionType* extension = extensionTypeOf(tensor.dtype());
  nb::object dtype =
      extension ? mlDtype(*extension) : nb::object();  // fails before any work without ml_dtypes
  const auto itemsize = static_cast<Py_ssize_t>(dataTypeSize(tensor.dtype()));
  nb::object array = numpy().asarray(nb::cast(TensorBuffer(tensor, format, itemsize)));
  return extension ? array.attr("view")(dtype) : array;
}

std::string ortTypeName(const TensorInfo& info) {
  std::string element;
  switch (info.dtype) {
    case DataType::kFloat32:
      element = "float";
      break;
    case DataType::kFloat64:
      element = "double";
      break;
    case DataType::kFloat8E4M3FN:
      element = "float8e4m3fn";
      break;
    case DataType::kFloat8E4M3FNUZ:
      element = "float8e4m3fnuz";
      break;
    case DataType::kFloat8E5M2:
      element = "float8e5m2";
      break;
    case DataType::kFloat8E5M2FNUZ:
      element = "float8e5m2fnuz";
      break;
    case DataType::kFloat4E2M1:
      element = "float4e2m1";
      break;
    case DataType::kFloat8E8M0:
      element = "float8e8m0";
      break;
    case DataType::kUndefined:
      element = "undefined";
      break;
    default:
      element = dataTypeName(info.dtype);  // int64, bool, string, float16, bfloat16, uint4 ...
  }
  std::string type = "tensor(" + element + ")";
  if (info.mapKeyType != DataType::kUndefined)
    type = "map(" + dataTypeName(info.mapKeyType) + "," + type + ")";  // map(int64,tensor(float))
  if (info.isSequence) type = "seq(" + type + ")";
  if (info.isOptionalType) type = "optional(" + type + ")";
  return type;
}

void bindTensors(nb::module_& m) {
  // Looked up now, while the import holds the interpreter: a first lookup from two threads at
  // once could deadlock on the static's guard and the GIL.
  numpy();
  nb::class_<TensorBuffer>(
      m, "TensorBuffer", nb::type_slots(tensorBufferSlots),
      "kiln-owned storage of an output; the numpy array returned by run views it (its .base).")
      .def_prop_ro("address", &TensorBuffer::address, "Address of the tensor's first element.");
  m.def(
      "_input_view",
      [](nb::handle array) {
        TensorInfo any;
        any.name = "array";
        Tensor t = tensorFromPython(array, any);
        return nb::make_tuple(reinterpret_cast<uintptr_t>(t.raw()), dataTypeName(t.dtype()),
                              tensorToPython(t));
      },
      "For tests: (address, kiln dtype name, round-tripped array) of the tensor kiln makes of "
      "`array`.");
}

}  // namespace kiln::python
