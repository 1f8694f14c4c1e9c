"""The course's own notebook runs (solutions, bench-checks, the parity sample) use kernels on Unix sockets."""
import asyncio
import os
import stat

from autograder.course import KERNEL_ARGS
from autograder.course.kernels import LocalKernelManager


def test_a_local_kernel_answers_over_sockets_in_a_private_folder_and_opens_no_port():
    async def run():
        manager = LocalKernelManager(kernel_name="python3")
        await manager.start_kernel(extra_arguments=KERNEL_ARGS)
        try:
            client = manager.client()
            client.start_channels()
            await client.wait_for_ready(timeout=60)
            reply = await client.execute_interactive("x = 6 * 7", timeout=60)
            folder = os.path.dirname(manager.connection_file)
            sockets = [name for name in os.listdir(folder) if stat.S_ISSOCK(os.stat(os.path.join(folder, name)).st_mode)]
            client.stop_channels()
            return reply["content"]["status"], manager.get_connection_info()["transport"], folder, sockets
        finally:
            await manager.shutdown_kernel(now=True)

    status, transport, folder, sockets = asyncio.run(run())
    assert (status, transport) == ("ok", "ipc")
    assert len(sockets) == 5 and os.stat(folder).st_mode & 0o777 == 0o700
