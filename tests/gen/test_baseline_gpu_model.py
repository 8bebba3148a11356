"""The GPU model (:mod:`nnrtl.gen.baseline.gpu_model`): a roofline of each task of an RNN
stack's training step, and the step on the GPU alone."""

import pytest

from nnrtl.gen.baseline.gpu_model import (P100, REGISTER_SHARE, V100, Gpu, Workload,
                                          gpu_only_seconds, gpu_tasks)

#: A GPU with round figures: 1 TFLOP/s, 100 GB/s, 1 MB of registers, 1 us launches.
TOY = Gpu(name="toy", peak_tflops=1.0, memory_gbps=100.0, register_bytes=1 << 20,
          launch_seconds=1e-6, barrier_seconds=1e-6, source="test")


def test_a_gpu_task_is_its_roofline_bound_plus_a_launch():
    assert TOY.task(2e9, 1e6) == pytest.approx(2e-3 + 1e-6)        # compute-bound
    assert TOY.task(1e3, 1e9) == pytest.approx(1e-2 + 1e-6)        # memory-bound


def test_gpu_tasks_count_the_layers_products():
    """LSTM, 8 cells, T = 10, batch 2: the input GEMM is 2 T B I 4H = 10,240 flops; GC twice
    that; WU 2 per parameter (4H (2H) + 2 4H = 576 parameters), 12 bytes each."""
    work = Workload("lstm", 8, 1, 10, 2)
    tasks = gpu_tasks(work, TOY)
    words = 4 * (10 * 2 * 8 + 8 * 32 + 10 * 2 * 32)
    assert tasks["imvm_fw"] == pytest.approx(max(10_240 / 1e12, words / 1e11) + 1e-6)
    assert tasks["wu"] == pytest.approx(max(2 * 576 / 1e12, 12 * 576 / 1e11) + 1e-6)
    assert tasks["gc"] >= tasks["imvm_fw"]


def test_the_persistent_algorithm_keeps_weights_on_chip_only_where_they_fit():
    # 4 x 256 x 256 fp32 = 1 MiB fits the P100's registers at the persistent share; 4 x 1,024^2
    # = 16 MiB does not
    assert 4 * 4 * 256 * 256 <= REGISTER_SHARE * P100.register_bytes < 4 * 4 * 1024 * 1024
    small, large = Workload("lstm", 256, 5, 100, 1), Workload("lstm", 1024, 5, 100, 1)
    assert gpu_only_seconds(small, P100, algorithm="cudnn_pd")["weights_on_chip"]
    assert not gpu_only_seconds(large, P100, algorithm="cudnn_pd")["weights_on_chip"]
    for work in (small, large):
        assert gpu_only_seconds(work, P100, algorithm="cudnn_pd")["seconds"] < \
            gpu_only_seconds(work, P100)["seconds"]
    with pytest.raises(ValueError, match=r"^algorithm must be cudnn_std or cudnn_pd"):
        gpu_only_seconds(small, P100, algorithm="cublas")


def test_a_faster_gpu_takes_less_time_for_the_same_step():
    work = Workload("gru", 512, 3, 200, 2)
    for algorithm in ("cudnn_std", "cudnn_pd"):
        assert gpu_only_seconds(work, V100, algorithm=algorithm)["seconds"] < \
            gpu_only_seconds(work, P100, algorithm=algorithm)["seconds"]
