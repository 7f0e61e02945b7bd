# argv[1]: pytest options written into pyproject.toml's [tool.pytest.ini_options] addopts
import os
import sys

opts = sys.argv[1]
text = open("pyproject.toml").read() if os.path.exists("pyproject.toml") else ""
header = "[tool.pytest.ini_options]"
line = "addopts = " + repr(opts).replace("'", '"')
if header in text:
    text = text.replace(header, header + "\n" + line, 1)
else:
    text += f"\n{header}\n{line}\n"
open("pyproject.toml", "w").write(text)
