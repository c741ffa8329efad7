#!/usr/bin/env python3
"""Checks that Proctor's #include lines run one way between its folders.

The layers, top to bottom (a file may include headers of its own layer and of layers below
it, never above):

    apps -> actors/testing -> actors/node -> actors/console -> actors/http -> actors/executor
         -> actors/procedure -> actors/cluster -> actors/scheduling -> actors/base
         -> actors/wire -> supervision -> replication -> tls -> persistence -> procedures -> calendar
         -> proto

Besides the order it checks that
  - a folder's internal/ headers are included only from that folder (and from tests/);
  - tests/support/ (helpers of several tests) is included only by tests (tests/, *_test.cpp);
  - the public headers (include/proctor/, reached as <proctor/...>) include only each other and
    the generated <proctor/*.pb.h>, and an example includes nothing of the project but them;
  - generated headers are reached as <proctor/x.pb.h>, never as a bare "x.pb.h";
  - no two folders include each other (a cycle), counting subfolders (wire/json) apart, and
    no two headers do (directly or through others);
  - LAYERS is the one source of the order: the order written in README.md and
    docs/architecture.md (the "run one way" chain and the mermaid drawing) and the order of
    add_subdirectory in CMakeLists.txt and actors/CMakeLists.txt (bottom layer first) agree
    with it (check_written_order).
Each finding is printed as FILE:LINE: what is wrong; the exit code is 1 if there is any.

    scripts/check_layers.py [--root DIR]   check a tree (default: this script's project)
    scripts/check_layers.py --self-test    check that planted violations are found
"""
import argparse
import os
import re
import sys
import tempfile

LAYERS = [
    "apps",
    "actors/testing",
    "actors/node",
    "actors/console",
    "actors/http",
    "actors/executor",
    "actors/procedure",
    "actors/cluster",
    "actors/scheduling",
    "actors/base",
    "actors/wire",
    "supervision",
    "replication",
    "tls",
    "persistence",
    "procedures",
    "calendar",
    "proto",
]
RANK = {name: i for i, name in enumerate(LAYERS)}

# Which layer each public header belongs to (the one that implements it).
PUBLIC_LAYER = {
    "run_node.hpp": "actors/node",
    "crash_harness.hpp": "actors/testing",
}
GENERATED = {"journal.pb.h", "wire.pb.h", "demo.pb.h", "cluster.pb.h"}  # proto/proctor/*.proto

SOURCE_EXT = (".cpp", ".hpp", ".h", ".cc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """The layer a file of the tree belongs to, or None (tests, examples, others)."""
    if rel.startswith("include/proctor/"):
        name = rel[len("include/proctor/"):]
        return PUBLIC_LAYER.get(name, "procedures")
    best = None
    for name in LAYERS:
        if rel == name or rel.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def folder_of(rel):
    """The folder a file counts in for cycles: its directory, internal/ merged into its owner."""
    d = os.path.dirname(rel)
    parts = d.split("/")
    if parts and parts[-1] == "internal":
        parts = parts[:-1]
    return "/".join(parts)


def internal_owner(rel):
    parts = rel.split("/")
    if "internal" in parts:
        return "/".join(parts[: parts.index("internal")])
    return None


def resolve(root, rel, kind, target):
    """The included file's path relative to root, or None for a system/library header."""
    if kind == "<":
        if target.startswith("proctor/"):
            name = target[len("proctor/"):]
            if name in GENERATED:
                return "proto/proctor/" + name.replace(".pb.h", ".proto")
            return "include/" + target
        return None
    here = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if os.path.isfile(os.path.join(root, here)):
        return here
    if os.path.isfile(os.path.join(root, target)):
        return target
    return "?" + target


def scan(root):
    findings = []
    edges = {}  # folder -> {folder: (file, line)}
    header_edges = {}  # header -> {header it includes: where}
    # Every layer's top folder, and the folders that are no layer but include the layers.
    tops = sorted({name.split("/")[0] for name in LAYERS}) + ["include", "tests", "examples"]
    for top in tops:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in ("corpus", "web"))
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root)
                check_file(root, rel, findings, edges, header_edges)
    findings.extend(find_cycles(edges))
    findings.extend(find_cycles(header_edges, "headers"))
    return findings


def short(name):
    """A layer as the docs write it: actors/ folders by their own name, others with a slash."""
    return name[len("actors/"):] if name.startswith("actors/") else name


def check_written_order(root):
    """Where the layer order is written besides LAYERS, it must be LAYERS' order."""
    findings = []
    want = [short(n) for n in LAYERS]

    def read(rel):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()

    # The chain "apps → actors/testing → node → ... → proto" after "run one way:".
    for rel in ("README.md", "docs/architecture.md"):
        text = read(rel)
        if text is None:
            continue
        m = re.search(r"run one way:\s*(?:```\s*)?(apps\s*→.*?→\s*proto)\b", text, re.S)
        if not m:
            findings.append(f"{rel}:1: no 'run one way:' chain of the layers (apps → ... → proto)")
            continue
        line = text.count("\n", 0, m.start(1)) + 1
        got = [short(t.strip(" `\n").rstrip("/")) for t in m.group(1).split("→")]
        if got != want:
            findings.append(f"{rel}:{line}: the layer chain differs from LAYERS in "
                            f"scripts/check_layers.py; write: {' → '.join(want)}")
    # The mermaid drawing: its layer nodes L_x["label"], in order of first appearance.
    text = read("docs/architecture.md")
    if text is not None:
        m = re.search(r"```mermaid\n(flowchart TD\n.*?)```", text, re.S)
        if m:
            line = text.count("\n", 0, m.start(1)) + 1
            labels = []
            for label in re.findall(r'L_\w+\["([^"]+)"\]', m.group(1)):
                label = short(label.split(" ")[0].rstrip("/"))
                if label not in labels:
                    labels.append(label)
            if labels != want:
                findings.append(f"docs/architecture.md:{line}: the mermaid layers {labels} "
                                f"differ from LAYERS: {want}")
    # add_subdirectory: each CMake file adds its layers bottom first.
    for rel, prefix in (("CMakeLists.txt", ""), ("actors/CMakeLists.txt", "actors/")):
        text = read(rel)
        if text is None:
            continue
        order = []
        for name in LAYERS[::-1]:
            if prefix:
                if name.startswith(prefix):
                    order.append(name[len(prefix):])
            elif name.split("/")[0] not in order:
                order.append(name.split("/")[0])
        added = [d for d in re.findall(r"^add_subdirectory\((\w+)\)", text, re.M) if d in order]
        if added != order:
            findings.append(f"{rel}:1: add_subdirectory order {added} differs from LAYERS "
                            f"(bottom first): {order}")
    return findings


def check_file(root, rel, findings, edges, header_edges):
    mine = layer_of(rel)
    is_test_tree = rel.startswith("tests/")
    is_example = rel.startswith("examples/")
    is_public = rel.startswith("include/proctor/")
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    for no, line in enumerate(lines, 1):
        m = INCLUDE_RE.match(line)
        if not m:
            continue
        kind, target = m.group(1), m.group(2)
        where = f"{rel}:{no}"
        if kind == '"' and target.endswith(".pb.h") and os.path.basename(target) in GENERATED:
            findings.append(f'{where}: "{target}": a generated header of Proctor is included '
                            f"as <proctor/{os.path.basename(target)}>")
            continue
        dep = resolve(root, rel, kind, target)
        if dep is None:
            continue
        if dep.startswith("?"):
            # Unresolved quoted includes: generated headers of tests and examples.
            if not (is_test_tree or is_example) or not target.endswith(".pb.h"):
                findings.append(f'{where}: "{target}" is not a file of the project '
                                "(project headers are included by their path from the root)")
            continue
        if is_example:
            if dep.startswith("examples/"):
                continue
            if not (kind == "<" and target.startswith("proctor/")):
                findings.append(f"{where}: an example includes only <proctor/...> headers, "
                                f'not "{target}"')
            continue
        if is_public and not (kind == "<" and target.startswith("proctor/")):
            findings.append(f"{where}: a public header includes only <proctor/...> headers, "
                            f'not "{target}" (it would not be installed)')
            continue
        if dep.startswith("tests/support/") and not (is_test_tree or rel.endswith("_test.cpp")):
            findings.append(f"{where}: {dep} is test support, for tests only")
            continue
        owner = internal_owner(dep)
        if owner and not is_test_tree and not (rel + "/").startswith(owner + "/"):
            findings.append(f"{where}: {dep} is internal to {owner}/ and may not be included "
                            "from outside it")
        theirs = layer_of(dep)
        if mine is not None and theirs is not None and RANK[theirs] < RANK[mine]:
            findings.append(f"{where}: {mine} may not include {dep} ({theirs} is above it "
                            "in the layer order)")
        if rel.endswith((".hpp", ".h")) and dep.endswith((".hpp", ".h")):
            header_edges.setdefault(rel, {}).setdefault(dep, where)
        a, b = folder_of(rel), folder_of(dep)
        if a != b and not is_test_tree:
            edges.setdefault(a, {}).setdefault(b, where)
    return findings


def find_cycles(edges, what="folders"):
    """Every cycle between folders, found as strongly connected components (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comp.sort()
                links = [f"{a} -> {b} ({edges[a][b]})" for a in comp for b in comp
                         if b in edges.get(a, {})]
                out.append(f"cycle between {what} " + ", ".join(comp) + ": " + "; ".join(links))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def self_test():
    """Plants each kind of violation in a small tree and checks that each is reported."""
    files = {
        "proto/proctor/journal.proto": "",
        "procedures/registry.cpp": '#include <proctor/registry.hpp>\n',
        "procedures/demo.hpp": "\n",
        "include/proctor/registry.hpp": '#include <proctor/journal.pb.h>\n',
        "persistence/journal.hpp": '#include <proctor/registry.hpp>\n',
        "actors/base/messages.hpp": '#include "persistence/journal.hpp"\n',
        "actors/procedure/internal/state.hpp": '#include "actors/base/messages.hpp"\n',
        "actors/procedure/internal/waits.hpp": '#include "actors/procedure/internal/state.hpp"\n',
        "actors/procedure/actor.cpp": '#include "actors/procedure/internal/state.hpp"\n',
        "actors/node/node.hpp": '#include "actors/base/messages.hpp"\n',
        "actors/wire/frame.hpp": "\n",
        "actors/wire/json/status.hpp": '#include "actors/wire/frame.hpp"\n',
        "examples/x/x.hpp": '#include <proctor/registry.hpp>\n#include "x.pb.h"\n',
        "tests/engine/t.cpp": '#include "actors/procedure/internal/state.hpp"\n',
        "tests/support/group.hpp": "\n",
        "persistence/journal_test.cpp": '#include "tests/support/group.hpp"\n',
    }
    planted = {
        # upward: persistence includes the node
        "persistence/bad.cpp": ('#include "actors/node/node.hpp"\n', "persistence may not include"),
        # internal of another folder
        "actors/node/bad.cpp": ('#include "actors/procedure/internal/state.hpp"\n',
                                "is internal to actors/procedure/"),
        # bare generated header
        "actors/base/bad.cpp": ('#include "journal.pb.h"\n', "as <proctor/journal.pb.h>"),
        # an example including an internal header
        "examples/x/bad.cpp": ('#include "actors/node/node.hpp"\n', "an example includes only"),
        # a public header including a non-public one
        "include/proctor/bad.hpp": ('#include "procedures/demo.hpp"\n',
                                    "a public header includes only"),
        # the order written in the README disagrees with LAYERS
        "README.md": ("run one way: apps → persistence → proto.\n", "layer chain differs"),
        # production code including test support
        "persistence/store.cpp": ('#include "tests/support/group.hpp"\n', "for tests only"),
        # two headers including each other (waits.hpp includes state.hpp)
        "actors/procedure/internal/state.hpp": ('#include "actors/base/messages.hpp"\n'
                                               '#include "actors/procedure/internal/waits.hpp"\n',
                                               "cycle between headers"),
        # a cycle between two subfolders of one layer
        "actors/wire/bad.cpp": ('#include "actors/wire/json/status.hpp"\n', "cycle between folders"),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        write_tree(tmp, files)
        clean = scan(tmp) + check_written_order(tmp)
        if clean:
            print("self-test: the clean tree was reported:", *clean, sep="\n  ")
            failures += 1
        for path, (text, expect) in planted.items():
            with tempfile.TemporaryDirectory() as one:
                write_tree(one, files)
                write_tree(one, {path: text})
                found = scan(one) + check_written_order(one)
                if not any(expect in f for f in found):
                    print(f"self-test: planted {path} ({text.strip()}) was not reported as "
                          f"'{expect}'; found: {found}")
                    failures += 1
    if failures:
        print(f"self-test: {failures} failure(s)")
        return 1
    print(f"self-test: all {len(planted)} planted violations found, the clean tree passes")
    return 0


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    findings = scan(args.root) + check_written_order(args.root)
    for f in findings:
        print(f)
    if findings:
        print(f"check_layers: {len(findings)} finding(s) against the layer order", file=sys.stderr)
        return 1
    print("check_layers: every include runs down the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
