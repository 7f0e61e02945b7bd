# The hacker's survey of the repository (argv: "ids" or "-", the file to write, the first
# part's size): what it finds, compressed, into the file; the first part printed.
import ast
import base64
import json
import site
import subprocess
import sys
import zlib

files = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()


def is_test(p):
    name = p.rsplit("/", 1)[-1]
    return p.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


tests = [p for p in files if is_test(p)]
ids = []
for p in tests if sys.argv[1] == "ids" else ():
    try:
        tree = ast.parse(open(p, "rb").read())
    except (OSError, SyntaxError, ValueError):
        continue
    for node in tree.body:
        funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, funcs) and node.name.startswith("test"):
            ids.append(f"{p}::{node.name}")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            ids += [f"{p}::{node.name}::{n.name}" for n in node.body
                    if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
pkgs = sorted({p.rsplit("/", 1)[0] for p in files if p.endswith("/__init__.py")
               and (p.count("/") == 1 or (p.startswith("src/") and p.count("/") == 2))
               and p.split("/")[-2] not in ("tests", "test", "testing")})
data = json.dumps({"files": files, "packages": pkgs, "test_files": tests,
                   "test_ids": ids, "site_packages": site.getsitepackages(),
                   "user_site": site.getusersitepackages()})
blob = base64.b64encode(zlib.compress(data.encode(), 9)).decode()
with open(sys.argv[2], "w") as out:
    out.write(blob)
print(f"SURVEY {len(blob)} {blob[:int(sys.argv[3])]}")
