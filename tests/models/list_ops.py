"""Print the ONNX operator types each model in a directory uses.

Run with the repo venv: .venv/bin/python tests/models/list_ops.py build/models

One line per model, `name (opset N): Op1 Op2 ...`, sorted; ops from a
non-default domain are printed as `domain::Op`, and ops inside subgraphs
(If/Loop/Scan bodies) are included.
"""
import argparse
import pathlib

import onnx

DEFAULT_DOMAINS = ("", "ai.onnx")


def graph_ops(graph):
    """Yield (domain, op_type) for every node in `graph` and its subgraphs."""
    for node in graph.node:
        yield node.domain, node.op_type
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs
            for subgraph in subgraphs:
                yield from graph_ops(subgraph)


def describe(path):
    model = onnx.load(str(path), load_external_data=False)
    opset = next(entry.version for entry in model.opset_import if entry.domain in DEFAULT_DOMAINS)
    ops = sorted({op if domain in DEFAULT_DOMAINS else f"{domain}::{op}" for domain, op in graph_ops(model.graph)})
    return f"{path.stem} (opset {opset}): {' '.join(ops)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=pathlib.Path, help="directory holding *.onnx files")
    for path in sorted(parser.parse_args().directory.glob("*.onnx")):
        print(describe(path))


if __name__ == "__main__":
    main()
