"""Readers for robot log formats, each through its optional extra: PX4 ULog (``pyulog``), ROS 1 and ROS 2
bags (``rosbags``) and MCAP (``mcap``; ROS 2 / ROS 1 messages decoded with ``rosbags``, JSON with the
standard library). A missing package is one line naming the ``pip install``.

Channel names (docs/fit.md): a ULog ``topic.field`` as pyulog names fields (``sensor_combined.gyro_rad[0]``;
instance 0 of a multi-instance topic), a bag or MCAP ``topic.field.path``
(``/imu/data.angular_velocity.x``, ``/imu/data.orientation_covariance[0]``). Time stamps: a ULog's
``timestamp`` (µs); for a bag or MCAP message the ``header.stamp`` its driver wrote when the message has
one (and it increases), else the time it was logged.

Example:
    >>> from sensorgym.fitting.log_formats import split_topic
    >>> split_topic("/imu/data.angular_velocity.x", ["/imu/data", "/odom"])
    ('/imu/data', 'angular_velocity.x')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .channels import INDEXED, Channel, check_times, closest, make_channel
from .errors import FitError, require

__all__ = ["field_value", "read_mcap", "read_rosbag", "read_ulog", "split_topic"]


def split_topic(name: str, topics: Sequence[str]) -> tuple[str, str]:
    """``(topic, field path)`` of a channel name: the longest known topic followed by ``.``."""
    for topic in sorted(topics, key=len, reverse=True):
        if name.startswith(topic + ".") and len(name) > len(topic) + 1:
            return topic, name[len(topic) + 1 :]
    raise KeyError(name)


def field_value(message: Any, path: str) -> Any:
    """The value at ``path`` (``"angular_velocity.x"``, ``"covariance[4]"``) of a decoded message (an object
    with attributes, or a JSON mapping)."""
    value = message
    for part in path.split("."):
        m = INDEXED.match(part)
        key, index = (m["base"], int(m["index"])) if m else (part, None)
        value = value[key] if isinstance(value, dict) else getattr(value, key)
        if index is not None:
            value = value[index]
    return value


def _fields(message: Any, prefix: str = "") -> list[str]:
    """The numeric field paths of a decoded message, for the fix of an unknown channel."""
    out: list[str] = []
    items = (
        message.items()
        if isinstance(message, dict)
        else (
            (k, getattr(message, k))
            for k in getattr(message, "__dataclass_fields__", {})
            if k != "__msgtype__"
        )
    )
    for key, value in items:
        path = f"{prefix}{key}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(path)
        elif isinstance(value, (list, tuple, np.ndarray)) and len(value) and np.isscalar(value[0]):
            out += [f"{path}[{i}]" for i in range(len(value))]
        elif hasattr(value, "__dataclass_fields__") or isinstance(value, dict):
            out += _fields(value, path + ".")
    return out


def _stamp(message: Any) -> float | None:
    """The driver's time stamp ``header.stamp`` in seconds, when the message has one."""
    try:
        stamp = field_value(message, "header.stamp")
    except (AttributeError, KeyError, TypeError):
        return None
    if isinstance(stamp, dict):
        return float(stamp.get("sec", 0)) + 1e-9 * float(stamp.get("nanosec", stamp.get("nsec", 0)))
    return float(stamp.sec) + 1e-9 * float(getattr(stamp, "nanosec", getattr(stamp, "nsec", 0)))


def _collect(
    path: Path,
    channels: Sequence[str],
    topics: Sequence[str],
    messages: Callable[[set[str]], Iterator[tuple[str, int, Any]]],
    fmt: str,
) -> list[Channel]:
    """Channels from decoded messages: ``messages(topics)`` yields ``(topic, log time ns, message)``."""
    wanted: dict[str, list[tuple[str, str]]] = {}
    for name in channels:
        try:
            topic, field = split_topic(name, topics)
        except KeyError:
            raise FitError(
                f"{path}: no topic for channel {name!r} (a {fmt} channel is topic.field.path)",
                closest(name, list(topics)),
            ) from None
        wanted.setdefault(topic, []).append((name, field))
    got: dict[str, dict[str, list]] = {
        t: {"log": [], "stamp": [], **{n: [] for n, _ in f}} for t, f in wanted.items()
    }
    for topic, log_ns, message in messages(set(wanted)):
        row = got[topic]
        for name, field in wanted[topic]:
            try:
                row[name].append(float(field_value(message, field)))
            except (AttributeError, KeyError, IndexError, TypeError, ValueError):
                raise FitError(
                    f"{path}: topic {topic!r} has no numeric field {field!r}",
                    closest(f"{topic}.{field}", [f"{topic}.{f}" for f in _fields(message)]),
                ) from None
        row["log"].append(log_ns * 1e-9)
        row["stamp"].append(_stamp(message))
    out = []
    for name in channels:
        topic, _ = split_topic(name, topics)
        row = got[topic]
        if len(row["log"]) < 3:
            raise FitError(f"{path}: topic {topic!r} has {len(row['log'])} messages", "record a longer log")
        stamps = row["stamp"]
        use_stamp = all(s is not None for s in stamps) and bool(
            np.all(np.diff(np.asarray(stamps, float)) > 0)
        )
        times = np.asarray(stamps if use_stamp else row["log"], dtype=np.float64)
        times = check_times(times, f"{path} topic {topic!r}", "record the log again with increasing times")
        which = "header.stamp" if use_stamp else "the time it was logged"
        source = f"{fmt} {name}, times: {which}"
        out.append(make_channel(name, times, np.asarray(row[name], np.float64), source, str(path)))
    return out


# -- PX4 ULog -----------------------------------------------------------------------------------------------
def read_ulog(path: Path, channels: Sequence[str]) -> list[Channel]:
    """Channels ``topic.field`` of a PX4 ULog, times from its ``timestamp`` (µs)."""
    pyulog = require("pyulog", "ulog", "reading a PX4 ULog")
    topics = sorted({name.split(".", 1)[0] for name in channels})
    try:
        log = pyulog.ULog(str(path), message_name_filter_list=topics)
    except Exception as e:  # pyulog raises plain Exceptions on a corrupt file
        raise FitError(
            f"{path}: cannot be read as a ULog ({' '.join(str(e).split())})", "pass a .ulg file"
        ) from None
    data = {
        d.name: d for d in sorted(log.data_list, key=lambda d: d.multi_id, reverse=True)
    }  # instance 0 wins
    out = []
    for name in channels:
        topic, _, field = name.partition(".")
        if topic not in data:
            every = pyulog.ULog(str(path), parse_header_only=True).message_formats
            raise FitError(
                f"{path}: no logged topic {topic!r} for channel {name!r}", closest(topic, sorted(every))
            )
        fields = data[topic].data
        if field not in fields or field == "timestamp":
            raise FitError(
                f"{path}: topic {topic!r} has no field {field!r}",
                closest(name, [f"{topic}.{f}" for f in fields if f != "timestamp"]),
            )
        times = check_times(fields["timestamp"] * 1e-6, f"{path} {topic}.timestamp", "pass an unmodified log")
        source = f"ULog {name}, times: timestamp (µs)"
        out.append(make_channel(name, times, fields[field].astype(np.float64), source, str(path)))
    return out


# -- ROS 1 / ROS 2 bags --------------------------------------------------------------------------------------
def read_rosbag(path: Path, channels: Sequence[str]) -> list[Channel]:
    """Channels ``topic.field.path`` of a ROS 1 bag (``.bag``) or a ROS 2 bag (its directory, or a file
    in it)."""
    highlevel = require("rosbags.highlevel", "rosbag", "reading a ROS bag")
    if path.suffix.lower() != ".bag" and path.is_file():
        path = path.parent  # a ROS 2 bag is its directory (metadata.yaml beside the storage files)
    try:
        reader = highlevel.AnyReader([path])
        reader.open()
    except Exception as e:  # rosbags raises its own errors for a file that is not a bag
        raise FitError(
            f"{path}: cannot be read as a ROS bag ({' '.join(str(e).split())})",
            "pass a ROS 1 .bag file or a ROS 2 bag directory (with metadata.yaml)",
        ) from None
    try:
        by_topic = {c.topic: c for c in reader.connections}

        def messages(topics: set[str]) -> Iterator[tuple[str, int, Any]]:
            conns = [c for c in reader.connections if c.topic in topics]
            for conn, log_ns, raw in reader.messages(connections=conns):
                yield conn.topic, log_ns, reader.deserialize(raw, conn.msgtype)

        return _collect(path, channels, list(by_topic), messages, "bag")
    finally:
        reader.close()


# -- MCAP ------------------------------------------------------------------------------------------------
def read_mcap(path: Path, channels: Sequence[str]) -> list[Channel]:
    """Channels ``topic.field.path`` of an MCAP file: ROS 2 (``cdr``) and ROS 1 messages (decoded with
    rosbags from the schema the file carries) and JSON messages."""
    reader_mod = require("mcap.reader", "mcap", "reading an MCAP file")
    with open(path, "rb") as f:
        try:
            reader = reader_mod.make_reader(f)
            summary = reader.get_summary()
        except Exception as e:  # mcap raises its own errors for a file that is not MCAP
            raise FitError(
                f"{path}: cannot be read as MCAP ({' '.join(str(e).split())})", "pass an .mcap file"
            ) from None
        if summary is None:
            raise FitError(f"{path}: an MCAP file without a summary", "rewrite it with `mcap recover`")
        topics = [c.topic for c in summary.channels.values()]
        decoders: dict[int, Callable[[bytes], Any]] = {}

        def decoder(schema: Any, channel: Any) -> Callable[[bytes], Any]:
            encoding = channel.message_encoding
            if encoding == "json":
                return lambda data: json.loads(data)
            if encoding in ("cdr", "ros1") and schema is not None:
                typesys = require(
                    "rosbags.typesys", "rosbag", f"decoding {encoding} messages of an MCAP file"
                )
                store = typesys.get_typestore(typesys.Stores.EMPTY)
                store.register(typesys.get_types_from_msg(schema.data.decode(), schema.name))
                decode = store.deserialize_cdr if encoding == "cdr" else store.deserialize_ros1
                return lambda data: decode(data, schema.name)
            raise FitError(
                f"{path}: topic {channel.topic!r} holds {encoding!r} messages, which fit cannot decode",
                "export the channels to CSV (e.g. with Foxglove) and fit that",
            )

        def messages(wanted: set[str]) -> Iterator[tuple[str, int, Any]]:
            for schema, channel, message in reader.iter_messages(topics=sorted(wanted)):
                if channel.id not in decoders:
                    decoders[channel.id] = decoder(schema, channel)
                yield channel.topic, message.log_time, decoders[channel.id](message.data)

        return _collect(path, channels, topics, messages, "MCAP")
