"""Readers: per-packet records and the original Pantheon's merged text logs, into LinkEvents.

The text form (the original Pantheon's `*_datalink_run*.log`, and this harness's datalink.log and
acklink.log) has one event per line, times in ms since the run's start (Yan et al., ATC 2018,
§3.2; the original's analysis read these files):

    # init timestamp: 1795304565025.951      comments start with '#'
    1077.016 + 1464 1                         a packet of 1464 bytes of flow 1 entered the path
    1098.609 - 1464 21.593 1                  one left it, 21.593 ms after it entered
    1099.000 # 1500                           a delivery opportunity of 1500 bytes (capacity)

Single-flow logs of the original leave out the flow number (it is flow 1 then).

Speed: the original read these with a line-by-line Python loop; here the file is read whole and
split into lines with numpy, each line is classified by its layout (kind character and number of
fields), and the lines of each layout are handed as one block to Arrow's multithreaded CSV parser
(space-delimited). Lines that do not fit a layout (stray whitespace, odd characters, a cut-off
last line) take a slow path, one Python split each, which either reads them or names the problem
with its line number. Bad input never stops the reader: it is counted in Problems.

A delivery must match a send of its own: same flow and size, at its receive time minus its delay
(±1 µs for rounding), each send matched at most once. One that does not cannot be judged (its send
may be outside the log, or it is a duplicate) and is left out, so no flow delivers more than it sent.
A negative delay (the two ends' clocks disagree) is kept for throughput and loss and left out of
the delay statistics (metrics.py), with a warning.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from pantheon.analysis.events import LinkEvents, Problems
from pantheon.errors import PantheonError

SPACE, NEWLINE, HASH = ord(" "), ord("\n"), ord("#")
FIELDS = {"+": (("size", False), ("flow", False)), "-": (("size", False), ("delay", True), ("flow", False)), "#": (("size", False),)}
"""Fields after `t KIND`, per kind: (name, is a float). A trailing flow is optional for + and -."""
LAYOUTS = {
    (ord("+"), 2): ("+", ("t", "kind", "size")), (ord("+"), 3): ("+", ("t", "kind", "size", "flow")),
    (ord("-"), 3): ("-", ("t", "kind", "size", "delay")), (ord("-"), 4): ("-", ("t", "kind", "size", "delay", "flow")),
    (ord("#"), 2): ("#", ("t", "kind", "size")),
}
"""(kind byte, spaces in the line) -> (kind, columns), the well-formed lines the fast path reads."""


def _layout_table() -> np.ndarray:
    """Layout number (position in LAYOUTS) of kind byte * 8 + spaces in the line (7 for 7 or more)."""
    table = np.full(256 * 8, -1, dtype=np.int8)
    for number, (kind_byte, spaces) in enumerate(LAYOUTS):
        table[kind_byte * 8 + spaces] = number
    return table


LAYOUT_OF = _layout_table()
COLUMN_TYPES = {"t": pa.float64(), "size": pa.int64(), "delay": pa.float64(), "flow": pa.int64()}
PLAIN_BYTES_TABLE = bytes(0 if chr(b) in "0123456789.-+# \n" else 1 for b in range(256))
"""bytes.translate table: 0 for the bytes of a well-formed line, 1 for any other."""
MATCH_TOLERANCE_US = 1


class LogError(PantheonError):
    """A file that cannot be read at all (missing, or not a log)."""


def _block(lines: pa.StringArray, mask: np.ndarray, columns: tuple[str, ...]) -> pa.Table:
    """Arrow's CSV parser over the selected lines, which pa.filter packs into one buffer."""
    chosen = lines.filter(pa.array(mask))
    offsets = np.frombuffer(chosen.buffers()[1], dtype=np.int64)[chosen.offset:chosen.offset + len(chosen) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    text = chosen.buffers()[2][start:end]
    wanted = [c for c in columns if c != "kind"]
    table = pcsv.read_csv(
        pa.BufferReader(text),
        read_options=pcsv.ReadOptions(column_names=list(columns)),
        parse_options=pcsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, ignore_empty_lines=False),
        convert_options=pcsv.ConvertOptions(column_types={c: COLUMN_TYPES[c] for c in wanted}, include_columns=wanted),
    )
    if table.num_rows != len(chosen) or any(table[c].null_count for c in wanted):
        raise pa.ArrowInvalid("rows lost or empty fields")
    return table


def _slow_line(text: str, number: int, problems: Problems, events: dict[str, list]) -> None:
    """One line the fast path could not read: read it, or say what is wrong with it."""
    tokens = text.split()
    if not tokens:
        return
    if len(tokens) < 2:
        problems.add("truncated lines", [number])
        return
    kind = tokens[1]
    if kind not in FIELDS:
        problems.add("lines of unknown kind", [number])
        return
    fields = FIELDS[kind]
    required = 1 if kind == "#" else len(fields) - 1
    values = tokens[2:]
    if len(values) < required:
        problems.add("truncated lines", [number])
        return
    if len(values) > len(fields):
        problems.add("malformed lines (too many fields)", [number])
        return
    try:
        t_ms = float(tokens[0])
        parsed = [float(v) if is_float else int(v) for v, (_, is_float) in zip(values, fields)]
    except ValueError:
        problems.add("malformed lines (not a number)", [number])
        return
    if kind != "#" and len(parsed) == required:
        parsed.append(1)
    events[kind].append((number, t_ms, *parsed))


def parse_text(data: bytes, source: str) -> tuple[dict[str, dict[str, np.ndarray]], Problems]:
    """Columns of each kind of line in a Pantheon text log: '+' -> t, size, flow (ms, bytes, id);
    '-' -> t, size, delay, flow; '#' -> t, size; each with `line`, the 1-based line numbers."""
    problems = Problems(source)
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == NEWLINE)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    spaces = np.flatnonzero(buf == SPACE)
    first_space_index = np.searchsorted(spaces, starts)
    # the spaces before the next line's first one are this line's
    space_count = np.diff(first_space_index, append=len(spaces))
    first_space = spaces[np.minimum(first_space_index, len(spaces) - 1)] if len(spaces) else starts
    kind = buf[np.minimum(first_space + 1, len(buf) - 1)]
    after_kind = buf[np.minimum(first_space + 2, len(buf) - 1)]

    content = (starts < ends) & (buf[starts] != HASH)
    irregular = (first_space <= starts) | (first_space >= ends) | (after_kind != SPACE)
    # whole-buffer byte searches first: well-formed logs have none of these, and they are fast
    odd_bytes = data.translate(PLAIN_BYTES_TABLE)
    if b"\1" in odd_bytes:
        odd = np.flatnonzero(np.frombuffer(odd_bytes, dtype=np.uint8))
        irregular[np.searchsorted(ends, odd)] = True
    if b"  " in data:
        irregular[np.searchsorted(ends, spaces[1:][np.diff(spaces) == 1])] = True
    if b" \n" in data:
        irregular |= buf[ends - 1] == SPACE

    offsets = np.empty(len(ends) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(data))
    # one small integer per line: which LAYOUTS entry it fits (-1: none, or not a regular line)
    layout = LAYOUT_OF[kind.astype(np.int64) * 8 + np.minimum(space_count, 7)]
    layout[~content | irregular] = -1
    slow = content & (layout < 0)
    events: dict[str, list] = {k: [] for k in FIELDS}
    for number, (kind_name, columns) in enumerate(LAYOUTS.values()):
        mask = layout == number
        if not mask.any():
            continue
        try:
            table = _block(lines, mask, columns)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            slow |= mask  # e.g. '1.2.3': the slow path finds the line and names it
            continue
        block = {c: table[c].to_numpy() for c in table.column_names}
        if kind_name != "#" and "flow" not in block:
            block["flow"] = np.ones(table.num_rows, dtype=np.int64)
        block["line"] = np.flatnonzero(mask) + 1
        events[kind_name].append(block)

    slow_events: dict[str, list] = {k: [] for k in FIELDS}
    for index in np.flatnonzero(slow):
        text = data[starts[index]:ends[index]].decode("utf-8", errors="replace")
        _slow_line(text, int(index) + 1, problems, slow_events)
    by_kind: dict[str, dict[str, np.ndarray]] = {}
    for kind_name, fields in FIELDS.items():
        names = ["line", "t"] + [name for name, _ in fields]
        rows = slow_events[kind_name]
        if rows:
            block = {name: np.array([r[i] for r in rows], dtype=np.float64 if name in ("t", "delay") else np.int64)
                     for i, name in enumerate(names)}
            events[kind_name].append(block)
        joined = {
            name: (np.concatenate([b[name] for b in events[kind_name]]) if events[kind_name]
                   else np.zeros(0, dtype=np.float64 if name in ("t", "delay") else np.int64))
            for name in names
        }
        if len(events[kind_name]) > 1:  # blocks of several layouts: back to file order, so the first delivery of a send is kept
            in_file_order = np.argsort(joined["line"], kind="stable")
            joined = {name: values[in_file_order] for name, values in joined.items()}
        by_kind[kind_name] = joined
    return by_kind, problems


def _ms_to_us(t_ms: np.ndarray) -> np.ndarray:
    return np.rint(t_ms * 1000.0).astype(np.int64)


def _increasing(values: np.ndarray) -> bool:
    return bool(values.size == 0 or np.all(values[1:] > values[:-1]))


def _claim(send_keys: np.ndarray, send_left: np.ndarray, recv_keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Matches the wanted deliveries to sends of the same key, one send per delivery: the k-th
    delivery of a key (in file order) gets a send only while that key has k sends left.
    send_keys are unique and sorted, send_left their unclaimed counts (updated in place)."""
    got = np.zeros(recv_keys.size, dtype=bool)
    index = np.flatnonzero(wanted)
    if index.size == 0 or send_keys.size == 0:
        return got
    order = np.argsort(recv_keys[index], kind="stable")
    keys = recv_keys[index][order]
    unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
    rank = np.arange(keys.size) - np.repeat(first, counts)
    at = np.minimum(np.searchsorted(send_keys, unique), send_keys.size - 1)
    present = send_keys[at] == unique
    available = np.where(present, send_left[at], 0)
    got[index[order[rank < np.repeat(available, counts)]]] = True
    send_left[at[present]] -= np.minimum(counts, available)[present]
    return got


def _matched(send_flow: np.ndarray, send_t_us: np.ndarray, send_bytes: np.ndarray,
             recv_flow: np.ndarray, sent_at_us: np.ndarray, recv_bytes: np.ndarray) -> np.ndarray:
    """Which deliveries have a send of their own: same flow and size, sent at the delivery's time
    minus its delay, exactly or else within ±MATCH_TOLERANCE_US (rounding to the ms/1000 of the
    text); each send serves one delivery, so no flow delivers more than it sent. One pass per
    flow: runs have few flows and many packets."""
    found = np.zeros(recv_flow.size, dtype=bool)
    for flow in np.unique(recv_flow):
        sends = send_flow == flow
        mine = np.flatnonzero(recv_flow == flow)
        # one integer per (time, size): sizes of IP datagrams fit in 16 bits
        all_send_keys = send_t_us[sends] * 65536 + send_bytes[sends]
        recv_keys = sent_at_us[mine] * 65536 + recv_bytes[mine]
        if _increasing(all_send_keys) and _increasing(recv_keys):
            # the usual case (a FIFO path, no two packets of a flow in one µs): no key repeats
            at = np.minimum(np.searchsorted(all_send_keys, recv_keys), all_send_keys.size - 1)
            if np.array_equal(all_send_keys[at], recv_keys):
                found[mine] = True
                continue
        send_keys, send_left = np.unique(all_send_keys, return_counts=True)
        got = _claim(send_keys, send_left, recv_keys, np.ones(mine.size, dtype=bool))
        for shift_us in range(1, MATCH_TOLERANCE_US + 1):
            for sign in (-1, 1):
                got |= _claim(send_keys, send_left, recv_keys + sign * shift_us * 65536, ~got)
        found[mine] = got
    return found


def read_text_log(path: Path, *, capacity_only: bool = False) -> tuple[LinkEvents, Problems]:
    """LinkEvents of one Pantheon text log (deliveries without a matching send left out)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror}") from None
    columns, problems = parse_text(data, Path(path).name)
    opportunities = columns["#"]
    opp = (_ms_to_us(opportunities["t"]), opportunities["size"]) if opportunities["t"].size else None
    if capacity_only:
        return LinkEvents.build(([], [], []), ([], [], [], []), opp), problems
    sends, recvs = columns["+"], columns["-"]
    send_t_us, recv_t_us, delay_us = _ms_to_us(sends["t"]), _ms_to_us(recvs["t"]), _ms_to_us(recvs["delay"])
    matched = _matched(sends["flow"], send_t_us, sends["size"], recvs["flow"], recv_t_us - delay_us, recvs["size"])
    problems.add("deliveries without a matching send, left out", np.sort(recvs["line"][~matched]))
    problems.add("negative one-way delays (clocks out of step?), left out of delay statistics",
                 np.sort(recvs["line"][matched & (delay_us < 0)]))
    return LinkEvents.build(
        (sends["flow"], send_t_us, sends["size"]),
        (recvs["flow"][matched], recv_t_us[matched], recvs["size"][matched], delay_us[matched]),
        opp,
    ), problems


def _first_copies(flow: np.ndarray, uid: np.ndarray, received: np.ndarray) -> np.ndarray:
    """Row numbers (in file order) keeping one row per (flow, uid): a datagram logged twice is
    one datagram. Of its copies the one with a delivery is kept, so none is lost by dropping."""
    key = (flow.astype(np.uint64) << np.uint64(48)) | uid.astype(np.uint64)
    order = np.lexsort((~received, key))
    _, first = np.unique(key[order], return_index=True)
    return np.sort(order[first])


ECN_COLUMNS = ("ecn", "ce")
"""records.parquet's ECN columns (harness/records.py); records written before them read as Not-ECT,
never marked."""


def read_records(path: Path, direction: str = "data") -> tuple[LinkEvents, Problems]:
    """LinkEvents of one direction of a run's records.parquet (flows renumbered from 1), with each
    send's ECN codepoint and each delivery's CE mark (0 and False in records without them); a
    LogError naming the file when it cannot be read as records."""
    wanted = ["flow", "direction", "uid", "size_bytes", "send_us", "recv_us"]
    try:
        wanted += [c for c in ECN_COLUMNS if c in pq.read_schema(path).names]
        table = pq.read_table(path, columns=wanted)
        table = table.filter(pc.equal(table["direction"], direction))
        flow = table["flow"].to_numpy().astype(np.int64) + 1
        uid = table["uid"].to_numpy().astype(np.int64)
        send_us = table["send_us"].to_numpy().astype(np.int64)
        size = table["size_bytes"].to_numpy().astype(np.int64)
        received = pc.is_valid(table["recv_us"]).to_numpy(zero_copy_only=False)
        recv_all = table["recv_us"].fill_null(0).to_numpy().astype(np.int64)
        ecn = (table["ecn"].fill_null(0).to_numpy().astype(np.int64) if "ecn" in wanted
               else np.zeros(flow.size, dtype=np.int64))
        ce_all = (table["ce"].fill_null(False).to_numpy(zero_copy_only=False).astype(bool) if "ce" in wanted
                  else np.zeros(flow.size, dtype=bool))
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError) as e:
        raise LogError(f"cannot read {path} as records ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    problems = Problems(Path(path).name, unit="row")
    keep = _first_copies(flow, uid, received)
    if keep.size < flow.size:
        copies = np.ones(flow.size, dtype=bool)
        copies[keep] = False
        problems.add("datagrams logged more than once (same flow and uid), counted once", np.flatnonzero(copies) + 1)
        flow, send_us, size, received, recv_all = flow[keep], send_us[keep], size[keep], received[keep], recv_all[keep]
        ecn, ce_all = ecn[keep], ce_all[keep]
    recv_us = recv_all[received]
    delay_us = recv_us - send_us[received]
    rows = keep + 1
    problems.add("negative one-way delays (clocks out of step?), left out of delay statistics",
                 rows[received][delay_us < 0])
    return LinkEvents.build((flow, send_us, size), (flow[received], recv_us, size[received], delay_us),
                            ecn=(ecn, ce_all[received])), problems
