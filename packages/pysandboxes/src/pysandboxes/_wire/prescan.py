"""The shape of a result stream, checked before one object of it is built.

Part of the decoder (``codec``), on the trusted side. Unpickling a hostile stream can
cost the caller far more than its size before any class is named: ten bytes can make
the unpickler reserve gigabytes for its memo, one byte makes an empty list (an 80-fold
growth), a few megabytes nest lists a million levels deep. So the opcodes are read
first, without building anything, and the stream is refused unless:

- every opcode is one the sandboxed side's encoder writes for values (protocol 5,
  binary): never a class by text (``GLOBAL``, ``INST``, ``OBJ``), never ``BUILD`` or
  ``NEWOBJ`` (they would set attributes or call ``__new__`` on what the stream names),
  never the extension registry, out-of-band buffers, or a memo slot of its choosing;
  persistent ids only for ``remote-result-mode=objects``;
- the structure it builds stays under the bounds: nesting depth, number of objects and
  an estimate of the memory they take (what the unpickler would allocate);
- it calls nothing but a maker (``REDUCE`` of what ``STACK_GLOBAL`` named), fills nothing
  but a container, and hashes no object description (a dict key, a set member).

The reply budget does not trust sharing: 155 KB can refer 600 times to one dict of 30,000
keys, and what copies or hashes what it refers to (a maker, an object description, a
dict key, later the application) pays for the whole tree each time. So each memo
reference to a container, and what a maker or a description gets, is charged all that is
under it, as a copy would be: the bounds hold for the tree the stream describes.
"""

from __future__ import annotations

import struct

from pysandboxes._wire.values import RefusedValue

_U4 = struct.Struct("<I").unpack_from
_U8 = struct.Struct("<Q").unpack_from


# Categories of opcodes (one byte each), as plain numbers: the loop below compares them
# often, and constants cost less than global names. 0: refused.
_TABLE: dict[bytes, tuple[int, int, int]] = {
    # opcode: (category, width of its argument or of its length field, bytes it costs)
    b"\x8c": (2, 1, 56),  # SHORT_BINUNICODE
    b"C": (2, 1, 40),  # SHORT_BINBYTES
    b"\x8a": (2, 1, 32),  # LONG1
    b"\x94": (3, 0, 8),  # MEMOIZE
    b"K": (1, 1, 0),  # BININT1 (small ints are shared)
    b"M": (1, 2, 32),  # BININT2
    b"J": (1, 4, 32),  # BININT
    b"G": (1, 8, 24),  # BINFLOAT
    b"N": (1, 0, 0),  # NONE
    b"\x88": (1, 0, 0),  # NEWTRUE
    b"\x89": (1, 0, 0),  # NEWFALSE
    b"(": (8, 0, 0),  # MARK
    b"]": (4, 0, 64),  # EMPTY_LIST
    b"}": (4, 0, 72),  # EMPTY_DICT
    b"\x8f": (4, 0, 216),  # EMPTY_SET
    b")": (4, 0, 0),  # EMPTY_TUPLE (shared)
    b"e": (7, 0, 8),  # APPENDS (per item)
    b"u": (7, 0, 32),  # SETITEMS (per key and per value)
    b"\x90": (7, 0, 16),  # ADDITEMS (per item)
    b"a": (5, 1, 8),  # APPEND (one item)
    b"s": (5, 2, 32),  # SETITEM (a key and a value)
    b"h": (11, 1, 0),  # BINGET
    b"j": (11, 4, 0),  # LONG_BINGET
    b"\x85": (9, 1, 64),  # TUPLE1
    b"\x86": (9, 2, 72),  # TUPLE2
    b"\x87": (9, 3, 80),  # TUPLE3
    b"X": (12, 4, 56),  # BINUNICODE
    b"\x8d": (12, 8, 56),  # BINUNICODE8
    b"B": (12, 4, 40),  # BINBYTES
    b"\x8e": (12, 8, 40),  # BINBYTES8
    b"\x96": (12, 8, 64),  # BYTEARRAY8
    b"\x8b": (12, 4, 32),  # LONG4
    b"\x93": (13, 2, 0),  # STACK_GLOBAL (module and name: a maker)
    b"R": (14, 2, 64),  # REDUCE (a maker and its arguments)
    b"\x95": (15, 8, 0),  # FRAME
    b"t": (10, 0, 56),  # TUPLE (+8 per item)
    b"\x91": (10, 0, 216),  # FROZENSET (+8 per item)
    b".": (16, 0, 0),  # STOP
    b"0": (17, 0, 0),  # POP
    b"1": (18, 0, 0),  # POP_MARK
    b"Q": (19, 0, 64),  # BINPERSID
    b"\x80": (20, 1, 0),  # PROTO
}
_CATEGORY = [0] * 256
_WIDTH = [0] * 256
_COST = [0] * 256
for _op, (_category, _width, _cost) in _TABLE.items():
    _CATEGORY[_op[0]], _WIDTH[_op[0]], _COST[_op[0]] = _category, _width, _cost
_NAMES = {
    b"c": "GLOBAL (a class named by text)",
    b"i": "INST",
    b"o": "OBJ",
    b"b": "BUILD (setting the state of what the stream names)",
    b"\x81": "NEWOBJ",
    b"\x92": "NEWOBJ_EX",
    b"\x82": "EXT1 (the extension registry)",
    b"\x83": "EXT2 (the extension registry)",
    b"\x84": "EXT4 (the extension registry)",
    b"p": "PUT (a memo slot chosen by the stream)",
    b"q": "BINPUT (a memo slot chosen by the stream)",
    b"r": "LONG_BINPUT (a memo slot chosen by the stream)",
    b"\x97": "NEXT_BUFFER (an out-of-band buffer)",
    b"\x98": "READONLY_BUFFER",
    b"P": "PERSID",
    b"\x80": "PROTO after the start",
    b"Q": "a persistent id (objects are not rebuilt in remote-result-mode=values)",
}


def _malformed(why: str, pos: int) -> RefusedValue:
    return RefusedValue(f"not a valid result stream ({why} at byte {pos})")


def prescan(
    data: bytes | bytearray,
    *,
    objects: bool,
    max_depth: int,
    max_items: int,
    max_bytes: int,
) -> int:
    """Refuse ``data`` unless it is a protocol 5 pickle of values within the bounds
    (see the module docstring); nothing is built. Return ``WALK`` when the value must
    still be walked once built (it names a class, an object description, or refers
    twice to a container: a tree of scalars and containers needs no walk), plus
    ``CENSUS`` when a dict or set has keys whose hashes the stream chose.

    Structural errors the unpickler itself refuses (an item popped from below a mark)
    are not all checked here: it stops at them, having built no more than counted.

    Raises:
        RefusedValue: naming the opcode or bound that refused it.
    """
    size = len(data)
    if size < 3 or data[0] != 0x80 or not 2 <= data[1] <= 5:
        raise _malformed("no pickle protocol 2 to 5 header", 0)
    try:
        return _scan(data, size, objects, max_depth, max_items, max_bytes)
    except (IndexError, ValueError, struct.error):  # no operand, no mark, data past the end
        raise _malformed("an opcode without its operands", size) from None


# A stack slot or memo entry, as a node: (depth, size, objects, flags, slot); size and
# objects are those of the whole tree under it, as if every shared part were copied.
# Flags: it holds an object description; its hash is the stream's choice (a float, long,
# tuple, maker's value: keys that can be made to collide). Slot: -2 (-3, a 4-tuple),
# cannot be filled; -1, a container or a maker's value; else its memo index, where its
# latest node is kept. Nodes of fixed-size scalars and empty containers are shared.
_NOT_FILLED, _MEMBER, _OBJECT, _CHOSEN = -2, -3, 1, 2
#: ``prescan``'s answer: walk the value once built; count the hashes of keys (``codec``).
WALK, CENSUS = 1, 2
_SCALAR = [(0, cost, 0, _CHOSEN * (op == 0x47), _NOT_FILLED) for op, cost in enumerate(_COST)]
_EMPTY = [(1, cost, 1, 0, -1) for cost in _COST]
_EMPTY_TUPLE = (1, 0, 0, 0, _NOT_FILLED)
_SHORT = [
    [(0, cost + n, 1, _CHOSEN * (op == 0x8A), _NOT_FILLED) for n in range(256)] if kind == 2 else []
    for op, (kind, cost) in enumerate(zip(_CATEGORY, _COST, strict=True))
]
_MAKER = (0, 0, 0, 0, _NOT_FILLED)  # what STACK_GLOBAL pushes: only REDUCE may use it
_Node = tuple[int, int, int, int, int]


def _scan(
    data: bytes | bytearray,
    size: int,
    objects: bool,
    max_depth: int,
    max_items: int,
    max_bytes: int,
) -> int:
    stack: list[_Node] = []
    marks: list[int] = []
    memo: list[_Node] = []
    items = cost = walk = 0
    pos = 2
    category_of, width_of, cost_of, u4, u8 = _CATEGORY, _WIDTH, _COST, _U4, _U8
    scalar_of, empty_of, short_of = _SCALAR, _EMPTY, _SHORT
    push, pop = stack.append, stack.pop
    while pos < size:
        op = data[pos]
        category = category_of[op]
        pos += 1
        if category == 2:  # a string, bytes or long with a one-byte length
            node = short_of[op][data[pos]]
            pos += 1 + data[pos]
            push(node)
            cost += node[1]
        elif category == 3:  # MEMOIZE
            node = stack[-1]
            if (slot := node[4]) == -1:  # a container: its memo entry follows what fills it
                node = stack[-1] = (node[0], node[1], node[2], node[3], len(memo))
            elif slot >= 0:
                raise RefusedValue("the result stream remembers one object twice")
            memo.append(node)
        elif category == 11:  # BINGET, LONG_BINGET
            index = data[pos] if width_of[op] == 1 else u4(data, pos)[0]
            pos += width_of[op]
            if index >= len(memo):
                raise _malformed("a memo entry that was never made", pos)
            push(node := memo[index])
            items += 1
            if node[0]:  # a shared container: charged whole at every use
                walk |= WALK
                cost += node[1]
                items += node[2]
        elif category == 1:  # a scalar of fixed size
            pos += width_of[op]
            push(scalar_of[op])
            cost += cost_of[op]
        elif category == 8:  # MARK
            marks.append(len(stack))
        elif category == 4:  # an empty container
            push(empty_of[op] if op != 0x29 else _EMPTY_TUPLE)
            items += 1
            cost += cost_of[op]
        elif category in (5, 7):  # APPEND, SETITEM; APPENDS, SETITEMS, ADDITEMS
            start = marks.pop() if category == 7 else len(stack) - width_of[op]
            if start < 1:
                raise IndexError
            members = stack[start:]
            del stack[start:]
            if stack[-1][4] < -1:
                raise RefusedValue("the result stream uses a fill on what is not a container")
            if members:
                stack[-1] = node = _filled(stack[-1], members, op, memo, max_depth)
                cost += cost_of[op] * (len(members) if category == 7 else 1)
                if node[3] & _CHOSEN and op not in (0x61, 0x65) and not walk & CENSUS:
                    keys = members if op == 0x90 else members[::2]  # ADDITEMS: a set's
                    walk |= CENSUS * any(key[3] & _CHOSEN for key in keys)
        elif category in (9, 10):  # TUPLE1, TUPLE2, TUPLE3; TUPLE, FROZENSET
            start = marks.pop() if category == 10 else len(stack) - width_of[op]
            if start < 0:
                raise IndexError
            members = stack[start:]
            del stack[start:]
            own = cost_of[op] + 8 * len(members) * (category == 10)
            node = _joined(members, own)
            if len(members) == 4 and op == 0x74:  # an enum member's description, maybe
                node = (*node[:4], _MEMBER)
            if op == 0x91 and node[3] & _OBJECT:
                raise RefusedValue(_HASHED)
            if op == 0x91 and any(member[3] & _CHOSEN for member in members):
                walk |= CENSUS
            if node[0] > max_depth:
                raise RefusedValue(_TOO_DEEP.format(max_depth))
            push(node)
            items += 1
            cost += own
        elif category == 12:  # a string, bytes or long with a 4 or 8 byte length
            length = u4(data, pos)[0] if width_of[op] == 4 else u8(data, pos)[0]
            pos += width_of[op] + length
            push((0, cost_of[op] + length, 1, _CHOSEN * (op == 0x8B), _NOT_FILLED))
            items += 1
            cost += cost_of[op] + length
        elif category == 13:  # STACK_GLOBAL: a module and a name become a maker
            if len(stack) < 2:
                raise IndexError
            del stack[-2:]
            push(_MAKER)
            items += 1
            walk |= WALK
        elif category == 14:  # REDUCE: a maker and its arguments, which it may copy
            if stack[-2] is not _MAKER:  # (an IndexError when there are not two)
                raise RefusedValue("the result stream uses REDUCE on what is not a value class")
            depth, used, count, held, _ = stack[-1]
            del stack[-2:]
            push((depth, cost_of[op] + used, 1 + count, held | _CHOSEN, -1))
            items += 1 + count
            cost += cost_of[op] + used
        elif category == 15:  # FRAME: its length only says how the rest is read
            if u8(data, pos)[0] > size - pos - 8:
                raise _malformed("a frame longer than the stream", pos)
            pos += 8
        elif category == 16:  # STOP
            if pos != size or len(stack) != 1 or marks:
                raise _malformed("STOP before the end, or with items left", pos)
            return walk
        elif category == 17:  # POP: an item, or the mark when none is above it
            if marks and len(stack) == marks[-1]:
                marks.pop()
            else:
                pop()
        elif category == 18:  # POP_MARK
            del stack[marks.pop() :]
        elif category == 19 and objects:  # BINPERSID: an object description, rebuilt
            # Its attributes are copied into it; a member exists (rebuild checks its hash).
            depth, used, count, _, kind = stack[-1]
            stack[-1] = (depth, cost_of[op] + used, 1 + count, _OBJECT * (kind != _MEMBER), -2)
            items += 1 + count
            cost += cost_of[op] + used
            walk |= WALK
        else:
            name = _NAMES.get(bytes((op,)), f"opcode {op:#04x}")
            raise RefusedValue(f"the result stream uses {name}, which values never need")
        if cost > max_bytes or items > max_items:
            raise _too_large(cost, max_bytes, items, max_items)
    raise _malformed("no STOP", pos)


def _joined(members: list[_Node], own: int) -> _Node:
    """The node of a tuple or frozenset of ``members`` (a tuple's hash is its members')."""
    deepest, grown, count, held = 0, own, 1, 0
    for depth, used, objects, holds, _ in members:
        if depth > deepest:
            deepest = depth
        grown += used
        count += objects
        held |= holds
    return (deepest + 1, grown, count, held | _CHOSEN, _NOT_FILLED)


def _filled(target: _Node, members: list[_Node], op: int, memo: list[_Node], limit: int) -> _Node:
    """The node of the container ``target`` once ``members`` are added (keys and values
    alternate for a dict; a set's are all keys, and no object description is hashed)."""
    slot = target[4]
    if slot >= 0:
        target = memo[slot]  # filled through any reference: the latest is remembered
    deepest, grown, count, held = target[0] - 1, target[1] + 8 * len(members), target[2], 0
    for depth, used, objects, holds, _ in members:  # as _joined: one call per fill
        if depth > deepest:
            deepest = depth
        grown += used
        count += objects
        held |= holds
    if held & _OBJECT and (  # ADDITEMS; SETITEMS, SETITEM
        op == 0x90 or (op in (0x75, 0x73) and any(k[3] & _OBJECT for k in members[::2]))
    ):
        raise RefusedValue(_HASHED)
    if deepest >= limit:
        raise RefusedValue(_TOO_DEEP.format(limit))
    node = (deepest + 1, grown, count, target[3] | held, slot)
    if slot >= 0:
        memo[slot] = node
    return node


_HASHED = "an object as a dict key or set member (its class's __hash__ would run): use values"
_TOO_DEEP = "a value nested deeper than {} levels"  # the decoder's fixed bound


def _too_large(cost: int, max_bytes: int, items: int, max_items: int) -> RefusedValue:
    shared = "each shared part counted at every use, as a copy of it would"
    if items > max_items:
        bound = "the decoder's fixed bound on objects per reply"
        return RefusedValue(f"a value of more than {max_items} objects, {shared} ({bound})")
    return RefusedValue(
        f"a value that would take more than {max_bytes} bytes to rebuild, {shared} (the "
        f"bound is sandboxes(result_limit={max_bytes}); a larger result_limit allows it)"
    )


def classes(data: bytes | bytearray, limit: int = 100_000) -> list[tuple[str, str]]:
    """The ``(module, name)`` pairs a stream names, in order, as far as it can be read
    (for messages: nothing is built, nothing decoded but the names)."""
    found: list[tuple[str, str]] = []
    pushed: list[str | None] = []
    memo: list[str | None] = []
    pos, size = 2, len(data)
    try:
        for _ in range(limit):
            if pos >= size:
                break
            op = data[pos]
            category, width = _CATEGORY[op], _WIDTH[op]
            pos += 1
            if op in (0x63, 0x69):  # GLOBAL, INST: "module\nname\n"
                second = data.index(b"\n", data.index(b"\n", pos) + 1)
                module, name = bytes(data[pos:second]).decode("ascii", "replace").split("\n")
                found.append((module, name))
                pos = second + 1
                pushed.append(None)
            elif category in (2, 12):
                length = int.from_bytes(data[pos : pos + width], "little")
                text = bytes(data[pos + width : pos + width + length])
                unicode = op in (0x8C, 0x58, 0x8D)
                pushed.append(text.decode("utf-8", "replace") if unicode else None)
                pos += width + length
            elif category == 3:  # MEMOIZE
                memo.append(pushed[-1] if pushed else None)
            elif category == 11:  # BINGET, LONG_BINGET
                index = int.from_bytes(data[pos : pos + width], "little")
                pushed.append(memo[index] if index < len(memo) else None)
                pos += width
            elif category == 13:  # STACK_GLOBAL
                if len(pushed) >= 2 and pushed[-2] is not None and pushed[-1] is not None:
                    found.append((str(pushed[-2]), str(pushed[-1])))
                pushed.append(None)
            elif category == 15:  # FRAME
                pos += 8
            elif category == 16 or (category == 0 and op not in _SKIPPABLE):
                break
            else:
                pos += width if category in (1, 20) else _SKIPPABLE.get(op, 0)
                pushed.append(None)
    except (IndexError, ValueError):
        pass
    return found


#: Refused opcodes with a fixed-size argument, skipped when reading names.
_SKIPPABLE = {0x62: 0, 0x81: 0, 0x92: 0, 0x71: 1, 0x72: 4, 0x82: 1, 0x83: 2, 0x84: 4}
