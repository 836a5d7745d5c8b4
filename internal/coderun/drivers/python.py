# sandhold code driver for python: runs cells in one namespace, like a
# Jupyter kernel. It runs INSIDE the sandbox as the sandbox user; it is not
# a boundary, only a protocol. Requests arrive on stdin as "<len>\n<json>";
# replies leave as frames, each one write() of at most PIPE_BUF bytes so
# that nothing else writing to the same pipe can tear it:
#   \x1e <nonce:32> <kind:C|E> <len:4 hex> <payload> \x1f
# A message is the payloads of its C frames and of the final E frame.
import ast, base64, builtins, json, linecache, os, sys, traceback, types, warnings

NONCE = sys.argv[1].encode()
CHUNK = 4000

# Private copies of the pipes (os.dup makes them non-inheritable), and
# /dev/null as the cells' stdin so input() cannot eat the protocol.
IN, OUT, ERR = os.dup(0), os.dup(1), os.dup(2)
_null = os.open("/dev/null", os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
sys.argv = [""]

def send(fd, msg):
    data = json.dumps(msg, default=repr).encode()
    parts = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [b""]
    for i, p in enumerate(parts):
        kind = b"E" if i == len(parts) - 1 else b"C"
        os.write(fd, b"\x1e" + NONCE + kind + b"%04x" % len(p) + p + b"\x1f")

def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        b = os.read(IN, n - len(buf))
        if not b:
            sys.exit(0)
        buf += b
    return bytes(buf)

def read_request():
    line = bytearray()
    while True:
        b = os.read(IN, 1)
        if not b:
            sys.exit(0)
        if b == b"\n":
            break
        line += b
        if len(line) > 20:
            sys.exit(2)
    return json.loads(read_exact(int(line)))

warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
warnings.filterwarnings("ignore", message=".*FigureCanvasAgg is non-interactive.*")

NS = {"__name__": "__main__", "__builtins__": builtins}
OUTPUTS = []

RICH = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
        ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"),
        ("image/jpeg", "_repr_jpeg_"), ("text/latex", "_repr_latex_"),
        ("application/json", "_repr_json_"))

def bundle(obj):
    data = {"text/plain": repr(obj)}
    for mime, meth in RICH:
        f = getattr(obj, meth, None)
        if f is None or isinstance(obj, type):
            continue
        try:
            v = f()
        except Exception:
            continue
        if v is None:
            continue
        if isinstance(v, tuple):
            v = v[0]
        if isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        data[mime] = v
    return data

def display(*objs, **kw):
    flush_std()
    for o in objs:
        OUTPUTS.append({"output_type": "display_data", "data": bundle(o), "metadata": {}})

builtins.display = display

def flush_std():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass

def flush_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        import io
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            OUTPUTS.append({"output_type": "display_data", "metadata": {},
                            "data": {"image/png": base64.b64encode(buf.getvalue()).decode(),
                                     "text/plain": repr(fig)}})
        plt.close("all")
    except Exception as e:
        OUTPUTS.append(error_output(e, None))

def error_output(e, tb):
    lines = traceback.format_exception(type(e), e, tb)
    return {"output_type": "error", "ename": type(e).__name__, "evalue": str(e),
            "traceback": "".join(lines).splitlines()}

def leading_indent(code):
    # Like IPython: when the cell's first non-blank line is indented, that
    # indent is removed from every line that starts with it (a cell pasted
    # from indented text runs as written).
    lines = code.splitlines(True)
    first = next((l for l in lines if l.strip()), "")
    prefix = first[:len(first) - len(first.lstrip(" \t"))]
    if not prefix:
        return code
    return "".join(l[len(prefix):] if l.startswith(prefix) else l for l in lines)

def run_cell(count, code):
    code = leading_indent(code)
    name = "<cell-%d>" % count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    # Like IPython: the last statement's value is shown when it is an
    # expression, unless the cell ends with a semicolon.
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), NS)
    if last is not None:
        value = eval(compile(last, name, "eval"), NS)
        if value is not None:
            NS["_"] = value
            flush_std()
            OUTPUTS.append({"output_type": "execute_result", "execution_count": count,
                            "data": bundle(value), "metadata": {}})

try:
    import importlib.util
    HAS_MPL = importlib.util.find_spec("matplotlib") is not None
except Exception:
    HAS_MPL = False
send(OUT, {"t": "ready", "version": "%d.%d.%d" % sys.version_info[:3], "matplotlib": HAS_MPL})

while True:
    req = read_request()
    OUTPUTS = []
    status = "ok"
    # The cell's own environment variables (env), restored after it.
    saved = {k: os.environ.get(k) for k in (req.get("env") or {})}
    try:
        os.environ.update(req.get("env") or {})
        if req.get("cwd"):
            os.chdir(req["cwd"])
        run_cell(req["id"], req["code"])
    except SystemExit as e:
        status = "error"
        OUTPUTS.append({"output_type": "error", "ename": "SystemExit", "evalue": str(e.code),
                        "traceback": ["SystemExit: %s" % (e.code,)]})
    except BaseException as e:
        status = "error"
        tb = None if isinstance(e, SyntaxError) else e.__traceback__
        # Hide the driver's own frames: the user's code starts below them.
        while tb is not None and tb.tb_frame.f_code.co_filename != "<cell-%d>" % req["id"]:
            tb = tb.tb_next
        OUTPUTS.append(error_output(e, tb))
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    flush_std()
    flush_figures()
    send(ERR, {"t": "end", "id": req["id"]})
    send(OUT, {"t": "result", "id": req["id"], "status": status, "outputs": OUTPUTS})
