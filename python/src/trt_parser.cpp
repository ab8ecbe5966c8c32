// kiln.OnnxParser: fills a network from an ONNX model, as TensorRT's trt.OnnxParser.
#include <Python.h>

#include <nanobind/stl/string.h>

#include "kiln/onnx_parser.h"
#include "trt_common.h"

namespace kiln::python {

namespace {

struct PyParser {
  nb::object network;  // the kiln.INetworkDefinition, kept alive
  std::shared_ptr<PyLogger> logger;
  std::unique_ptr<OnnxParser> parser;
};

// One error of the last parse, with TensorRT's accessors.
struct PyParserError {
  ParserError error;
};

}  // namespace

void bindTrtParser(nb::module_& m) {
  nb::enum_<ParserErrorCode>(m, "ErrorCode", nb::is_arithmetic(), "Codes of OnnxParser errors.")
      .value("SUCCESS", ParserErrorCode::kSUCCESS)
      .value("INTERNAL_ERROR", ParserErrorCode::kINTERNAL_ERROR)
      .value("IO_ERROR", ParserErrorCode::kIO_ERROR)
      .value("MODEL_DESERIALIZE_FAILED", ParserErrorCode::kMODEL_DESERIALIZE_FAILED)
      .value("INVALID_GRAPH", ParserErrorCode::kINVALID_GRAPH)
      .value("INVALID_NODE", ParserErrorCode::kINVALID_NODE)
      .value("INVALID_VALUE", ParserErrorCode::kINVALID_VALUE)
      .value("UNSUPPORTED_NODE", ParserErrorCode::kUNSUPPORTED_NODE);

  nb::class_<PyParserError>(m, "ParserError",
                            "An error of OnnxParser.parse: what, where (node) and its code.")
      .def("code", [](const PyParserError& e) { return e.error.code; })
      .def("desc", [](const PyParserError& e) { return e.error.message; })
      .def(
          "node", [](const PyParserError& e) { return e.error.nodeIndex; },
          "The node's index; -1 when not about one.")
      .def("node_name", [](const PyParserError& e) { return e.error.nodeName; })
      .def("node_operator", [](const PyParserError& e) { return e.error.opType; })
      .def("__str__", [](const PyParserError& e) { return e.error.toString(); })
      .def("__repr__",
           [](const PyParserError& e) { return "<kiln.ParserError " + e.error.toString() + ">"; });

  nb::class_<PyParser>(m, "OnnxParser", "Fills an empty network from an ONNX model.")
      .def(
          "__init__",
          [](PyParser* self, nb::handle network, nb::handle logger) {
            PyNetwork& net = nb::cast<PyNetwork&>(network);
            auto l = makeLogger(logger);
            new (self)
                PyParser{nb::borrow(network), l, std::make_unique<OnnxParser>(*net.network, *l)};
          },
          nb::arg("network"), nb::arg("logger"))
      .def(
          "parse",
          [](PyParser& p, nb::handle model, nb::handle path) {
            Py_buffer view;
            if (PyObject_GetBuffer(model.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
            std::string baseDir = ".";
            if (!path.is_none()) {
              std::string file = nb::cast<std::string>(nb::str(path));
              size_t slash = file.find_last_of('/');
              baseDir = slash == std::string::npos ? "." : file.substr(0, slash);
            }
            Status s;
            {
              nb::gil_scoped_release release;
              s = p.parser->parse(view.buf, static_cast<size_t>(view.len), baseDir);
            }
            PyBuffer_Release(&view);
            return s.ok();
          },
          nb::arg("model"), nb::arg("path").none() = nb::none(),
          "Parses a serialized ModelProto (bytes or any buffer); `path`, when given, locates "
          "external data. "
          "Returns False on failure: num_errors and get_error(i) say why.")
      .def(
          "parse_from_file",
          [](PyParser& p, const std::string& path) {
            nb::gil_scoped_release release;
            return p.parser->parseFromFile(path).ok();
          },
          nb::arg("model"), "Parses an ONNX file; False on failure (see get_error).")
      .def_prop_ro("num_errors", [](const PyParser& p) { return p.parser->getNbErrors(); })
      .def(
          "get_error",
          [](const PyParser& p, int i) {
            if (i < 0 || i >= p.parser->getNbErrors()) {
              throw nb::index_error(("error index " + std::to_string(i) + " out of range (" +
                                     std::to_string(p.parser->getNbErrors()) + " errors)")
                                        .c_str());
            }
            return PyParserError{p.parser->getError(i)};
          },
          nb::arg("index"))
      .def("clear_errors", [](PyParser& p) { p.parser->clearErrors(); })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });
}

}  // namespace kiln::python
