"""Reading ONNX's protobuf wire format directly, where parsing the whole
ModelProto would copy what should stay where it lies: the model file's big
inline weights become external data references to their own bytes."""

from __future__ import annotations

from typing import Optional

#: Inline weights of at least this many bytes are mapped from the model file.
_MAP_INLINE_BYTES = 1 << 16


def _varint(data, pos: int, end: int) -> tuple:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(data, pos: int, end: int):
    """(field number, wire type, start of the field, start of its payload,
    end of the field) of each protobuf field in data[pos:end]."""
    while pos < end:
        start = pos
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos, end)
            payload = start
        elif wire == 1:
            payload, pos = pos, pos + 8
        elif wire == 5:
            payload, pos = pos, pos + 4
        elif wire == 2:
            length, payload = _varint(data, pos, end)
            pos = payload + length
        else:  # groups: not in ONNX
            raise ValueError(f"wire type {wire}")
        if pos > end:
            raise ValueError("field past the end")
        yield number, wire, start, payload, pos


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _length_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def without_inline_weights(data, location: str) -> Optional[bytes]:
    """The serialized ModelProto `data` (the bytes of the model file named
    `location`) with every initializer's raw_data of at least
    _MAP_INLINE_BYTES replaced by an external data reference to its own
    bytes in that file; None when there is none (or the bytes are not a
    well-formed protobuf: the parser then says what is wrong)."""
    try:
        data = memoryview(data)  # slices are views: only what is kept is copied
        parts, stripped = [], 0
        end = len(data)
        for number, wire, start, payload, stop in _fields(data, 0, end):
            if number != 7 or wire != 2:  # ModelProto.graph
                parts.append(data[start:stop])
                continue
            graph = []
            for gnum, gwire, gstart, gpayload, gstop in _fields(data, payload, stop):
                if gnum != 5 or gwire != 2:  # GraphProto.initializer
                    graph.append(data[gstart:gstop])
                    continue
                tensor, raw, located = [], None, False
                for tnum, twire, tstart, tpayload, tstop in _fields(data, gpayload, gstop):
                    if tnum == 9 and twire == 2:  # raw_data
                        raw = (tpayload, tstop)
                    located = located or tnum in (13, 14)  # external_data, data_location
                    tensor.append((tnum, data[tstart:tstop]))  # a view
                if raw is None or located or raw[1] - raw[0] < _MAP_INLINE_BYTES:
                    graph.append(data[gstart:gstop])
                    continue
                body = b"".join(bytes(b) for n, b in tensor if n != 9)
                for key, value in (("location", location), ("offset", str(raw[0])),
                                   ("length", str(raw[1] - raw[0]))):
                    body += _length_field(13, _length_field(1, key.encode()) +
                                          _length_field(2, value.encode()))
                body += _encode_varint(14 << 3) + _encode_varint(1)  # EXTERNAL
                graph.append(_length_field(5, body))
                stripped += 1
            parts.append(_length_field(7, b"".join(bytes(b) for b in graph)))
        if not stripped:
            return None
        return b"".join(bytes(b) for b in parts)
    except (ValueError, IndexError):
        return None
