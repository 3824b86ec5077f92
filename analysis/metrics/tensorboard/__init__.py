"""The views of the retired TensorBoard profiler plugin (``torch-tb-profiler`` 0.4.3), offline.

One module per view, each defining its numbers as the plugin did (read from its source; the
parity tests compare with the plugin on real traces, ``tests/parity/test_tensorboard_oracle.py``):

- :mod:`.plugin_steps`: which events the plugin sees as what (its step spans, its categories);
  shared by the views below;
- :mod:`.gpu_summary`: GPU utilization, est. SM efficiency, est. achieved occupancy, tensor-core
  share per GPU (the entry: the plugin's overview);
- :mod:`.step_time_breakdown`: the overview's per-step Kernel / Memcpy / Memset / Runtime /
  DataLoader / CPU Exec / Other partition;
- :mod:`.kernel_table`: the kernel view (per kernel name, and per kernel x launch configuration);
- :mod:`.operator_table`: the operator view (by name, or name and input shapes);
- :mod:`.module_view`: the ``nn.Module`` hierarchy with its time;
- :mod:`.call_tree`: the plugin's per-thread call trees (operator, memory and module views);
- :mod:`.memory_view`: the memory view of ``profile_memory=True`` traces (curve, peaks, operator
  memory, allocation/free pairs).

Window: the plugin's, which is the whole trace's profiler steps (every ``ProfilerStep#N``, the last
included: HTA's ``include_last_profiler_step=True``), not this project's analysed window; the
kernel table and the memory view read the whole trace. Deviations: ``docs/deviations.md``.
"""
