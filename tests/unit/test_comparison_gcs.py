"""compare() of runs loaded from gs:// (a real local GCS server) equals compare() of local files."""

from __future__ import annotations

import uuid

import pandas as pd

from analysis import TraceAnalysis, compare
from analysis.testing.trace_pairs import changed_pair


def test_gs_runs_compare_like_local_runs(gcs_emulator, tmp_path):
    import gcsfs

    gcs = gcsfs.GCSFileSystem(endpoint_url=gcs_emulator, token="anon")
    bucket = f"compare-{uuid.uuid4().hex[:8]}"
    gcs.mkdir(bucket)
    base_dir, test_dir = changed_pair().write(tmp_path / "local")
    for side, local in (("base", base_dir), ("test", test_dir)):
        for f in local.iterdir():
            gcs.put_file(str(f), f"{bucket}/{side}/{f.name}")
    options = {"endpoint_url": gcs_emulator, "token": "anon"}

    def remote(side):
        return TraceAnalysis(f"gs://{bucket}/{side}", storage_options=options, use_cache=False,
                             progress=False, max_workers=1)

    def local(path):
        return TraceAnalysis(path, use_cache=False, progress=False, max_workers=1)

    from_gs = compare(remote("base"), remote("test"))
    from_disk = compare(local(base_dir), local(test_dir))
    for name, table in from_disk.tables().items():
        pd.testing.assert_frame_equal(from_gs.tables()[name], table, obj=name)
    pd.testing.assert_frame_equal(from_gs.compare_traces(), from_disk.compare_traces())
    assert from_gs.ops_diff() == from_disk.ops_diff()
    assert from_gs.base.engine.source.startswith("gs://")
