// Package dist is multi-process data-parallel training: a ProcessGroup of processes
// (ranks) with collectives — all-reduce, broadcast, barrier — and DDP, which keeps a
// model's replicas identical by averaging gradients during backward, as PyTorch's
// DistributedDataParallel does.
//
// The happy path, in a program started by gamprun (cmd/gamprun):
//
//	pg, err := dist.Init() // rank and world size from the launcher; one process without one
//	defer pg.Close()
//	ddp, err := dist.NewDDP(model, pg, dist.DDPOptions{}) // after nn.To and amp.Prepare
//	dopt, err := ddp.Optimizer(opt) // waits for the gradients before stepping
//	tr, err := amp.NewTrainer(ddp, dopt, loss, dev, cfg)
//	dist.SyncScaler(tr.Scaler, pg) // every rank skips the same fp16 steps
//	// each rank calls tr.Step on its own share of every batch
//
// # Backends
//
// MPI (Open MPI 4 or 5, libmpi.so.40) is bound at run time with purego, so gamp builds
// with CGO_ENABLED=0 and runs without MPI installed; Init reports what to install only
// when a job needs it. MPI connects processes that an MPI launcher started: gamprun
// uses mpirun when it is on PATH, or start the job with mpirun directly. Tensors are
// staged through host memory (one copy each way on the CPU). All MPI calls run on one
// locked OS thread; an asynchronous all-reduce is an MPI_Iallreduce whose progress that
// thread drives while the caller computes (GAMP_MPI_BLOCKING=1 runs MPI_Allreduce on
// that thread instead, which Open MPI does faster for mid-sized buffers on a
// machine with cores to spare). GAMP_MPI_LIB names the library when it is not in the
// usual places.
//
// NCCL (GPUs) runs on the CUDA backend's device memory; it has run on an H100 in a
// world of one process (every collective, and DDP bit for bit as the bare model), not
// yet across several GPUs. See nccl.go for its design: rank 0 creates the
// ncclUniqueId and shares it over TCP at MASTER_ADDR:MASTER_PORT with Rendezvous;
// collectives run in place on the device buffers the CUDA backend's storages expose
// through DeviceBuffer.
//
// # Who may join a job
//
// Rendezvous's rank 0 listens on MASTER_ADDR only (127.0.0.1 when every rank is on one
// machine; never every interface), and a connection becomes a rank only by proving it
// holds the job's token, GAMP_JOB_TOKEN: an HMAC-SHA256 of a nonce rank 0 sends, so the
// token never crosses the network and a recorded hello is useless later. The blob goes
// back sealed with AES-GCM under a key derived from the token, so a stranger on the port
// can neither read it nor pose as rank 0. Hellos are read concurrently, each with a
// short deadline: a client that stays silent, sends garbage, or claims a rank with the
// wrong token neither takes the rank nor delays the job. gamprun generates a random
// token per job and hands it to its ranks through the environment; a job started by
// hand sets the same value (at least 16 bytes) on every rank; a world of more than one
// process without a token is an error that says so.
//
// A world of one process (no launcher, or WORLD_SIZE=1) is the Local group: every
// collective is a no-op, so the same program runs alone.
//
// # DDP
//
// Gradients are bucketed (25 MiB; the first bucket 1 MiB) in reverse registration
// order, averaged in float32 (float64 for float64 parameters), and each bucket's
// all-reduce starts as soon as backward has produced all its gradients. The first
// synchronised backward teaches DDP how many gradient contributions each parameter
// gets (parameters used twice get two), so it communicates only at Finish that once;
// DDPOptions.DynamicGraph keeps doing so for models whose graph changes. NoSync runs
// backward passes that only accumulate locally (gradient accumulation), and
// SyncBatchNorm (ConvertSyncBatchNorm) normalises with the global batch's statistics.
//
// Communication failures inside hooks, Forward or the optimizer wrapper panic: once
// ranks disagree the job cannot continue, and MPI jobs are torn down by mpirun.
package dist
