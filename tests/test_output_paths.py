"""Output paths that are not regular files (replica.artifacts.outputs.output_target).

Outputs used to be staged and moved into place with ``os.replace`` whatever the path named, so a
FIFO, a device node or a symbolic link given as ``--latex``, ``--plot``, ``--out`` or
``--markdown`` was replaced by a regular file (run as root, ``--plot /dev/full`` replaced the
system's ``/dev/full``). Now only regular files are replaced; a link keeps pointing where it did
and its target gets the content; a FIFO is written through; a socket is refused in one line.
Everything here happens in a temporary directory: no test touches a real ``/dev`` node.
"""
from __future__ import annotations

import contextlib
import io
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from replica.artifacts.outputs import (REFUSED, STREAM, atomic_write_text, check_output_file, output_target,
                                       staged_dir)
from replica.errors import ParameterError


def _reader(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    """A thread reading ``fifo`` to its end (a FIFO's writer blocks until there is a reader)."""
    got: list[bytes] = []

    def read():
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got


def _cli(*args: str) -> tuple[int, str, str]:
    from replica.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_derive_writes_through_a_fifo_and_keeps_a_link(tmp_path):
    fifo, real, link = tmp_path / "appendix.tex", tmp_path / "real.md", tmp_path / "link.md"
    os.mkfifo(fifo)
    real.write_text("old\n")
    link.symlink_to(real.name)
    reader, got = _reader(fifo)
    rc, _, err = _cli("derive", "ridge", "--latex", str(fifo), "--markdown", str(link))
    reader.join(timeout=60)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert got and got[0].startswith(b"% replica-artifact") and b"\\end{document}" in got[0]
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_text().startswith("<!-- replica-artifact")


def test_a_dangling_link_gets_its_target_created(tmp_path):
    link = tmp_path / "out.txt"
    link.symlink_to("made.txt")
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and (tmp_path / "made.txt").read_text() == "new\n"


def test_staged_outputs_replace_only_regular_files(tmp_path):
    out = tmp_path / "figures"
    out.mkdir()
    fifo, real = out / "table.csv", tmp_path / "elsewhere.png"
    os.mkfifo(fifo)
    real.write_bytes(b"old")
    (out / "plot.png").symlink_to(real)
    reader, got = _reader(fifo)
    with staged_dir(out) as stage:
        (stage / "table.csv").write_text("a,b\n1,2\n")
        (stage / "plot.png").write_bytes(b"png")
        (stage / "new.txt").write_text("x")
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got == [b"a,b\n1,2\n"]
    assert (out / "plot.png").is_symlink() and real.read_bytes() == b"png"
    assert (out / "new.txt").read_text() == "x"


def test_a_socket_is_refused_and_system_paths_are_streams(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert output_target(path)[1] == REFUSED
        with pytest.raises(ParameterError, match="plot: .* neither a regular file"):
            check_output_file(path, "plot")
    # classified without being opened: never replaced, only written through
    for p in ("/dev/null", "/dev/stdout", "/dev/full"):
        assert output_target(p)[1] == STREAM


USER_RIDGE = '''
import sympy as sp
from replica import L2, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
noise = symbol("noise", "z")
lam = parameter("lam", r"\\lambda")
model = Model(name="ridge", description="a user's ridge, named like the shipped one", h=h, hstar=hs,
              loss=sp.Rational(1, 2) * (hs[0] + noise / 2 - h[0]) ** 2, noise=[noise],
              data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={lam: 0.1})
'''


def test_derive_write_of_a_user_file_goes_beside_it(tmp_path):
    """``--write`` on a user's file named like a shipped model wrote the package's
    derivations/ridge.tex and .md; its exports go beside the file."""
    from replica.artifacts.paths import DERIVATIONS_DIR

    decl = tmp_path / "mine.py"
    decl.write_text(USER_RIDGE)
    shipped = {p: p.read_bytes() for p in (DERIVATIONS_DIR / "ridge.tex", DERIVATIONS_DIR / "ridge.md")}
    rc, out, err = _cli("derive", str(decl), "--write")
    assert rc == 0, err
    assert all(p.read_bytes() == b for p, b in shipped.items())
    assert "`ridge`" in (tmp_path / "mine.md").read_text() and (tmp_path / "mine.tex").exists()


@pytest.mark.parametrize("which", ["declaration", "twice"])
def test_an_output_that_is_an_input_or_another_output_is_refused_before_work(tmp_path, which):
    decl = tmp_path / "mine.py"
    decl.write_text(USER_RIDGE)
    args = (["--latex", str(decl)] if which == "declaration"
            else ["--latex", str(tmp_path / "f"), "--markdown", str(tmp_path / "f")])
    rc, out, err = _cli("derive", str(decl), *args)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, err
    assert decl.read_text() == USER_RIDGE and not (tmp_path / "f").exists()
    assert ("model file itself" if which == "declaration" else "is also given as --latex") in err
