"""The program that takes and restores a container's files, run there by root (see
:mod:`repogym.sandbox.snapshot`). Kept as text: it runs under the container's own Python 3
(3.6 or later, standard library only), started with ``-I -S -B`` so nothing the agent wrote
(environment variables, the working folder, a user site) reaches it.

``capture SPEC`` writes a tar stream to stdout: a manifest first, then every entry of the
writable paths that differs from the image's pristine copy (for paths that start empty, such as
``/tmp``: every entry). ``restore SPEC`` reads that stream on stdin into a container whose paths
were just reset to the pristine copy, then computes the difference again and prints
``RESTORE_OK`` only when it has the manifest's digest.

An entry differs when its type, permission bits, owner, group, content (regular files, compared
byte for byte) or link target (symbolic links) differ. Sockets and device nodes are left out.
Entry names travel hex-encoded in PAX headers, never as tar paths, and restoring refuses any path
whose folders are not real folders under the target.
"""

SCRIPT = r'''
import hashlib, json, os, re, shutil, stat, sys, tarfile

KINDS = {stat.S_IFREG: "f", stat.S_IFDIR: "d", stat.S_IFLNK: "l", stat.S_IFIFO: "p"}
CHUNK = 1 << 20


def kind(st):
    return KINDS.get(stat.S_IFMT(st.st_mode))


def walk(root, exclude):
    found = {}
    if root is None or not os.path.isdir(root) or os.path.islink(root):
        return found
    found["."] = os.lstat(root)

    def visit(folder, rel):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for entry in entries:
            if not rel and exclude is not None and exclude.match(entry.name):
                continue
            st = os.lstat(entry.path)
            if kind(st) is None:
                continue
            name = rel + entry.name
            found[name] = st
            if stat.S_ISDIR(st.st_mode):
                visit(entry.path, name + "/")

    visit(root, "")
    return found


def path_of(root, rel):
    return root if rel == "." else os.path.join(root, rel)


def digest_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                return False
            if not x:
                return True


def meta(st):
    return (kind(st), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def differs(target, pristine, rel, st, old):
    if old is None or meta(st) != meta(old):
        return True
    a, b = path_of(target, rel), path_of(pristine, rel)
    if kind(st) == "f":
        return st.st_size != old.st_size or not same_bytes(a, b)
    if kind(st) == "l":
        return os.readlink(a) != os.readlink(b)
    return False


def hexname(rel):
    return os.fsencode(rel).hex()


def delta(spec):
    """(lines of the digest, changed entries, deleted entries) over every target."""
    lines, changed, deleted = [], [], []
    for idx, (target, pristine, exclude) in enumerate(spec["targets"]):
        pattern = re.compile(exclude) if exclude else None
        cur, old = walk(target, pattern), walk(pristine, None) if pristine else {}
        if not pristine:
            cur.pop(".", None)  # a folder that starts empty: its own metadata is the mount's
        for rel, st in cur.items():
            if not differs(target, pristine, rel, st, old.get(rel)):
                continue
            path, k = path_of(target, rel), kind(st)
            key = digest_of(path) if k == "f" else (
                os.fsencode(os.readlink(path)).hex() if k == "l" else "")
            mode, uid, gid = meta(st)[1:]
            lines.append("C %d %s %s %o %d %d %s" % (idx, hexname(rel), k, mode, uid, gid, key))
            changed.append((idx, rel, st, key))
        for rel in old:
            parent = rel.rpartition("/")[0] or "."
            if rel not in cur and parent in cur and stat.S_ISDIR(cur[parent].st_mode):
                lines.append("D %d %s" % (idx, hexname(rel)))
                deleted.append((idx, rel))
    lines.sort()
    return hashlib.sha256("\n".join(lines).encode()).hexdigest(), changed, deleted


def capture(spec):
    digest, changed, deleted = delta(spec)
    out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
    manifest = json.dumps({"digest": digest, "entries": len(changed),
                           "deleted": [[i, hexname(r)] for i, r in deleted]}).encode()
    info = tarfile.TarInfo("manifest.json")
    info.size = len(manifest)
    out.addfile(info, _reader(manifest))
    for n, (idx, rel, st, key) in enumerate(changed):
        path, k = path_of(spec["targets"][idx][0], rel), kind(st)
        info = tarfile.TarInfo("e%d" % n)
        info.mode, info.uid, info.gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
        info.mtime = st.st_mtime
        info.pax_headers = {"RG.idx": str(idx), "RG.rel": hexname(rel), "RG.kind": k,
                            "RG.link": key if k == "l" else ""}
        info.type = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE, "l": tarfile.REGTYPE,
                     "p": tarfile.FIFOTYPE}[k]
        if k == "f":
            info.size = st.st_size
            with open(path, "rb") as f:
                out.addfile(info, f)
        else:
            out.addfile(info)
    out.close()
    sys.stdout.buffer.flush()


def _reader(data):
    import io
    return io.BytesIO(data)


def safe(root, rel):
    """The entry's path, once every folder above it is a real folder under ``root``."""
    path = path_of(root, rel)
    parent = os.path.dirname(path) if rel != "." else root
    if os.path.realpath(parent) != os.path.normpath(parent) or not (
            parent == root or parent.startswith(root.rstrip("/") + "/")):
        raise SystemExit("UNSAFE_PATH %s" % hexname(rel))
    return path


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def restore(spec):
    targets = [t[0] for t in spec["targets"]]
    stream = tarfile.open(fileobj=sys.stdin.buffer, mode="r|")
    first = stream.next()
    manifest = json.loads(stream.extractfile(first).read())
    for idx, name in manifest["deleted"]:
        remove(safe(targets[idx], os.fsdecode(bytes.fromhex(name))))
    folders = []
    for member in stream:
        if member is first:
            continue
        h = member.pax_headers
        root, k = targets[int(h["RG.idx"])], h["RG.kind"]
        rel = os.fsdecode(bytes.fromhex(h["RG.rel"]))
        path = safe(root, rel)
        if k == "d":
            if os.path.lexists(path) and (os.path.islink(path) or not os.path.isdir(path)):
                remove(path)
            if not os.path.lexists(path):
                os.mkdir(path, 0o700)
            folders.append((path, member))
            continue
        remove(path)
        if k == "f":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                shutil.copyfileobj(stream.extractfile(member), f, CHUNK)
        elif k == "l":
            os.symlink(os.fsdecode(bytes.fromhex(h["RG.link"])), path)
        else:
            os.mkfifo(path, 0o600)
        _own(path, member, k == "l")
    for path, member in reversed(folders):
        _own(path, member, False)
    digest = delta(spec)[0]
    if digest != manifest["digest"]:
        print("RESTORE_DIFFERS %s %s" % (manifest["digest"], digest))
        sys.exit(7)
    print("RESTORE_OK %s" % digest)


def _own(path, member, link):
    os.lchown(path, member.uid, member.gid)
    if not link:
        os.chmod(path, member.mode)
    os.utime(path, (member.mtime, member.mtime), follow_symlinks=not link)


def digest(spec):
    print("DIGEST %s" % delta(spec)[0])


{"capture": capture, "restore": restore, "digest": digest}[sys.argv[1]](json.loads(sys.argv[2]))
'''
