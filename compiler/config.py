"""Global configuration flags shared by the compiler and the runtime (`kiln.config`).

Flags mirror JAX's names: `enable_x64` (default off: int32/float32 defaults, 64-bit values
narrowed), `debug_nans` and `debug_infs` (results of jitted functions and eager operations
are checked; kiln.settings raises), `log_compiles` (as `KILN_LOG_COMPILES`) and `explain_cache_misses` (the same log, which names
why each specialisation was made), `enable_checks` (the SSA verifier runs after every pass,
as `KILN_VERIFY=1`), `disable_jit` (jitted functions run as plain Python, in every thread
without a `kiln.disable_jit` block of its own: runtime/jit.py). Options kiln accepts with no effect, because kiln always
behaves the way they ask for (docs/differences.md): `check_tracer_leaks` (an escaped traced
value is always an error) and the text option
`default_matmul_precision` (matrix products always run at the operands' full precision). Environment variables `KILN_ENABLE_X64=1` (or JAX's
`JAX_ENABLE_X64=1`) set the initial value. One whole-number option: `num_cpu_devices` (JAX's
`jax_num_cpu_devices`; unset: the runtime's devices module reads the environment); a module
that must refuse a change (the device count, once devices were listed) registers a guard with
`config.guard(name, check)`, which runs before the value changes and may raise. Text options: `dump_ir_to` (JAX's `jax_dump_ir_to`, or `JAX_DUMP_IR_TO`: the directory
where every compiled function's SSA stages are written, as `KILN_DUMP_DIR`, which comes first;
compiler/passes.py) and `dump_ir_modes` (recorded: kiln writes its stages whatever the
modes); `platforms` (JAX's `jax_platforms`: "cpu", "gpu"/"cuda" or a comma-separated list;
unset: the runtime's devices module reads `KILN_PLATFORMS` / `JAX_PLATFORMS`). One object
option: `default_device` (JAX's `jax_default_device`: a Device, a platform name or None; the
runtime registers the guard that checks it, runtime/_default_device.py). Options with a set
of values (`_choices`, the first the default): `numpy_rank_promotion` ("allow", "warn",
"raise": kiln.numpy's broadcasting of operands of different ranks), `legacy_prng_key`
("allow", "warn", "error": kiln.random given raw uint32 keys), and the transfer guards
(`transfer_guard`, `transfer_guard_host_to_device`, `..._device_to_host`,
`..._device_to_device`), which kiln records and does not check (docs/differences.md), and
`array_garbage_collection_guard` ("allow", "log", "fatal"). Flags the runtime acts on
(runtime/execution_guards.py): `no_tracing`, `no_execution`, `thread_guard`,
`allow_f16_reductions` (on by default: `_on_by_default`, read by `kiln.lax.reduce_sum`),
`use_shardy_partitioner` (on by default, as in JAX 0.10.2, or as `JAX_USE_SHARDY_PARTITIONER`
says: sharded jit on PJRT devices writes Shardy's shardings, else GSPMD's;
runtime/pjrt_partitioned.py), `debug_key_reuse` (kiln.random's key-reuse checker,
runtime/_key_reuse.py).
`jax2tf_associative_scan_reductions` is accepted with no effect (kiln has no jax2tf), and so
are `scan3`, `remat3` and `custom_vjp3`: in JAX they switch loops, `checkpoint` and
`custom_vjp` to new implementations with the same results; kiln has one implementation of
each.
JAX's persistent compilation cache and logging options (`_recorded`: `compilation_cache_dir`,
`enable_compilation_cache`, `persistent_cache_min_entry_size_bytes`,
`persistent_cache_min_compile_time_secs`, `persistent_cache_enable_xla_caches`,
`raise_persistent_cache_errors`, `logging_level`) are recorded as given and have no effect:
kiln always keeps its object code on disk, where `KILN_CACHE_DIR` says
(compiler/backends/llvm/disk_cache.py), and logs compiles with `log_compiles`.
`config_with_absl()` and `parse_flags_with_absl()` make the options absl command-line flags
(`--jax_enable_x64`, ...), as JAX's do; absl is imported only when they are called.
"""
import os


def _env_flag(*names):
    for name in names:
        v = os.environ.get(name)
        if v is not None:
            return v.strip().lower() in ("1", "true", "yes", "on")
    return False


_TRANSFER_GUARDS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")


class UnknownOptionError(ValueError, AttributeError):
    """`config.update` of an option kiln does not have: an AttributeError, as JAX raises (code
    written for several JAX versions catches it), and a ValueError."""


class Config:
    """A small flag store with JAX's `config.update(name, value)` interface."""

    _defaults = {
        "enable_x64": ("KILN_ENABLE_X64", "JAX_ENABLE_X64"),
        "debug_nans": ("KILN_DEBUG_NANS", "JAX_DEBUG_NANS"),
        "debug_infs": ("KILN_DEBUG_INFS", "JAX_DEBUG_INFS"),
        "log_compiles": ("JAX_LOG_COMPILES",),
        "explain_cache_misses": ("JAX_EXPLAIN_CACHE_MISSES",),
        "check_tracer_leaks": ("JAX_CHECK_TRACER_LEAKS",),
        "enable_checks": ("JAX_ENABLE_CHECKS",),
        "no_tracing": ("JAX_NO_TRACING",),
        "no_execution": ("JAX_NO_EXECUTION",),
        "jax2tf_associative_scan_reductions": ("JAX2TF_ASSOCIATIVE_SCAN_REDUCTIONS",),
        "thread_guard": ("JAX_THREAD_GUARD",),
        "scan3": ("JAX_SCAN3",),
        "remat3": ("JAX_REMAT3",),
        "custom_vjp3": ("JAX_CUSTOM_VJP3",),
        "disable_jit": ("KILN_DISABLE_JIT", "JAX_DISABLE_JIT"),
        "debug_key_reuse": ("JAX_DEBUG_KEY_REUSE",),
    }
    _on_by_default = {"allow_f16_reductions": (),
                      "use_shardy_partitioner": ("JAX_USE_SHARDY_PARTITIONER",)}

    _choices = {"numpy_rank_promotion": ("allow", "warn", "raise"),
                "legacy_prng_key": ("allow", "warn", "error"),
                **dict.fromkeys((
                    "transfer_guard", "transfer_guard_host_to_device",
                    "transfer_guard_device_to_host", "transfer_guard_device_to_device"),
                                 _TRANSFER_GUARDS),
                "array_garbage_collection_guard": ("allow", "log", "fatal")}
    _whole_numbers = ("num_cpu_devices",)
    _texts = ("platforms", "default_matmul_precision", "dump_ir_to", "dump_ir_modes")
    _objects = ("default_device",)
    _recorded = {"compilation_cache_dir": None, "enable_compilation_cache": True,
                 "persistent_cache_min_entry_size_bytes": 0,
                 "persistent_cache_min_compile_time_secs": 1.0,
                 "persistent_cache_enable_xla_caches": "xla_gpu_per_fusion_autotune_cache_dir",
                 "raise_persistent_cache_errors": False, "logging_level": None}

    def __init__(self):
        self._values = {name: _env_flag(*envs) for name, envs in self._defaults.items()}
        self._values.update({name: None
                             for name in self._whole_numbers + self._texts + self._objects})
        self._values.update({name: values[0] for name, values in self._choices.items()})
        self._values.update({name: _env_flag(*envs) if any(e in os.environ for e in envs)
                             else True for name, envs in self._on_by_default.items()})
        self._values.update(self._recorded)
        self._listeners = []
        self._guards = {}
        self._absl_parsed = False

    def update(self, name, value):
        key = name[4:] if name.startswith("jax_") else name
        if key not in self._values:
            raise UnknownOptionError(f"kiln.config.update: unknown option {name!r}; known "
                                     f"options: {', '.join(sorted(self._values))}")
        if key in self._whole_numbers:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"kiln.config.update({name!r}, {value!r}): expected a whole "
                                 f"number of at least 1")
        elif key in self._choices:
            if value not in self._choices[key]:
                raise ValueError(f"kiln.config.update({name!r}, {value!r}): expected one of "
                                 f"{', '.join(map(repr, self._choices[key]))}")
        elif key in self._texts:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"kiln.config.update({name!r}, {value!r}): expected a "
                                 f"string or None")
        elif key not in self._objects and key not in self._recorded:
            value = bool(value)
        if key in self._guards:
            self._guards[key](value)
        self._values[key] = value
        for listener in self._listeners:
            listener(key, value)

    def guard(self, name, check):
        """Run `check(value)` before option `name` changes; it raises to refuse."""
        self._guards[name] = check

    def read(self, name):
        return self._values[name[4:] if name.startswith("jax_") else name]

    def on_change(self, listener):
        self._listeners.append(listener)

    def config_with_absl(self):
        """JAX's `config.config_with_absl()`: define an absl flag `--jax_<option>` for each
        option (a bool, enum, integer or string flag whose default is the current value), and
        apply the ones given on the command line once `absl.app.run` has parsed it.
        `default_device` has no flag (an object, as in JAX), nor have the `_recorded` options."""
        from absl import app, flags
        self._define_absl_flags(flags)
        app.call_after_init(lambda: self._apply_absl_flags(flags.FLAGS))

    def parse_flags_with_absl(self):
        """JAX's `config.parse_flags_with_absl()`: define the flags (unless `config_with_absl`
        did) and apply the `--jax...` arguments of `sys.argv` before any `--`, once."""
        import itertools
        import sys
        from absl import flags
        if self._absl_parsed:
            return
        if "jax_enable_x64" not in flags.FLAGS:
            self._define_absl_flags(flags)
        argv = itertools.takewhile(lambda a: a != "--", sys.argv)
        flags.FLAGS(["", *(a for a in argv if a.startswith("--jax"))], known_only=True)
        self._apply_absl_flags(flags.FLAGS)
        self._absl_parsed = True

    def _define_absl_flags(self, flags):
        for name, value in self._values.items():
            flag, doc = f"jax_{name}", f"kiln.config option {name!r} (JAX's jax_{name})"
            if name in self._choices:
                flags.DEFINE_enum(flag, value, self._choices[name], doc)
            elif name in self._whole_numbers:
                flags.DEFINE_integer(flag, value, doc, lower_bound=1)
            elif name in self._texts:
                flags.DEFINE_string(flag, value, doc)
            elif name not in self._objects and name not in self._recorded:
                flags.DEFINE_bool(flag, value, doc)

    def _apply_absl_flags(self, FLAGS):
        for name in list(self._values):
            flag = f"jax_{name}"
            if flag in FLAGS and FLAGS[flag].present:
                self.update(name, FLAGS[flag].value)

    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        key = name[4:] if name.startswith("jax_") else name
        if key in values:
            return values[key]
        raise AttributeError(name)


config = Config()
