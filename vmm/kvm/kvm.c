// SPDX-License-Identifier: MIT
/*
 * Built-in KVM VMM: the VM, guest memory, vCPU threads and their run loop,
 * and the port/MMIO buses.  Devices live in vmm/kvm/kvm-serial.c,
 * vmm/kvm/kvm-chan.c and vmm/kvm/kvm-virtio.c, loaders in vmm/kvm/kvm-boot.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "vmm/kvm/kvm-priv.h"

/*
 * Signal used to kick a vCPU out of KVM_RUN when the VM stops.  Its handler
 * does nothing: the point is the -EINTR.  kvm_run->immediate_exit closes the
 * race with a vCPU that is just about to enter KVM_RUN.
 */
#define KVM_KICK_SIGNAL	(SIGRTMIN + 1)

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void kick_handler(int sig)
{
	(void)sig;
}

static void kick_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(KVM_KICK_SIGNAL, &sa, NULL);
}

int kvm_probe(char *why, size_t whylen)
{
	int fd, ver, err = 0;

	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		errbuf_set(why, whylen, "cannot open /dev/kvm: %s%s", strerror(errno),
			    errno == ENOENT ? " (no KVM: load kvm_intel/kvm_amd or enable "
			    "virtualisation)" : errno == EACCES ?
			    " (add yourself to the kvm group)" : "");
		return err;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver != KVM_API_VERSION) {
		errbuf_set(why, whylen, "/dev/kvm speaks API version %d, not %d", ver,
			    KVM_API_VERSION);
		err = -ENOTSUP;
	} else if (ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQCHIP) <= 0) {
		errbuf_set(why, whylen, "KVM has no in-kernel irqchip (KVM_CAP_IRQCHIP)");
		err = -ENOTSUP;
	} else if (ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_USER_MEMORY) <= 0) {
		errbuf_set(why, whylen, "KVM lacks KVM_CAP_USER_MEMORY");
		err = -ENOTSUP;
	}
	close(fd);
	return err;
}

void kvm_vm_set_state(struct kvm_vm *vm, enum kvm_vm_state st, int code,
		      const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vm->state_lock);
	/* The first terminal state wins: a poweroff followed by the stop it
	 * causes is still a poweroff. */
	if (vm->state == KVM_VM_RUNNING || vm->state == KVM_VM_CREATED) {
		vm->state = st;
		vm->exit_code = code;
		if (fmt) {
			va_start(ap, fmt);
			vsnprintf(vm->error, sizeof(vm->error), fmt, ap);
			va_end(ap);
		}
	}
	pthread_cond_broadcast(&vm->state_cond);
	pthread_mutex_unlock(&vm->state_lock);
	if (st != KVM_VM_RUNNING) {
		/* Ask every vCPU to leave; the vCPU threads are joined by
		 * kvm_vm_stop() from the owner's thread. */
		atomic_store(&vm->stopping, 1);
		for (unsigned i = 0; i < vm->nr_vcpus; i++) {
			struct kvm_vcpu *v = &vm->vcpus[i];

			if (!v->started)
				continue;
			v->run->immediate_exit = 1;
			pthread_kill(v->thread, KVM_KICK_SIGNAL);
		}
	}
}

int kvm_vm_add_pio(struct kvm_vm *vm, const struct kvm_dev *dev)
{
	if (vm->nr_pio >= KVM_MAX_DEVS)
		return -ENOSPC;
	vm->pio[vm->nr_pio++] = *dev;
	return 0;
}

int kvm_vm_add_mmio(struct kvm_vm *vm, const struct kvm_dev *dev)
{
	if (vm->nr_mmio >= KVM_MAX_DEVS)
		return -ENOSPC;
	vm->mmio[vm->nr_mmio++] = *dev;
	return 0;
}

static struct kvm_dev *bus_find(struct kvm_dev *devs, unsigned n, uint64_t addr,
				uint32_t len)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t end;

		if (__builtin_add_overflow(addr, len, &end))
			return NULL;
		if (addr >= devs[i].base && end <= devs[i].base + devs[i].len)
			return &devs[i];
	}
	return NULL;
}

/*
 * The channel sink.  Called with dev_lock held (from the channel port or the
 * virtio console), so bytes from several vCPUs never interleave mid-chunk.
 * A reader that does not keep up gets 100 ms of grace, then the rest of the
 * chunk is dropped and counted: a flooding guest must not freeze its vCPUs
 * forever, and the decoder notices the gap through hdr.seq.
 */
void kvm_vm_chan_write(struct kvm_vm *vm, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	atomic_fetch_add(&vm->chan_bytes, len);
	if (vm->chan_copy_fd >= 0 && vm->chan_copied + len <= KVM_DESC_CHAN_MAX &&
	    write(vm->chan_copy_fd, buf, len) == (ssize_t)len)
		vm->chan_copied += len;
	if (vm->chan_fd < 0)
		return;
	while (len) {
		ssize_t w = write(vm->chan_fd, p, len);

		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = vm->chan_fd, .events = POLLOUT };

			if (poll(&pfd, 1, 100) > 0 && !(pfd.revents & (POLLERR | POLLHUP)))
				continue;
		}
		atomic_fetch_add(&vm->chan_dropped, len);
		return;
	}
}

void kvm_vm_set_slots(struct kvm_vm *vm, uint64_t slot_pa, uint32_t nr,
		      uint32_t slot_size)
{
	/* meta 0 first: a reader between the stores sees no slots */
	atomic_store(&vm->slot_meta, 0);
	atomic_store(&vm->slot_pa, slot_pa);
	atomic_store(&vm->slot_meta, (uint64_t)nr | (uint64_t)slot_size << 32);
}

int kvm_vm_slot_info(const struct kvm_vm *vm, uint64_t *slot_pa, uint32_t *nr,
		     uint32_t *slot_size)
{
	uint64_t meta = atomic_load(&((struct kvm_vm *)vm)->slot_meta);

	if (!meta)
		return 0;
	*slot_pa = atomic_load(&((struct kvm_vm *)vm)->slot_pa);
	*nr = (uint32_t)meta;
	*slot_size = (uint32_t)(meta >> 32);
	return 1;
}

void *kvm_vm_gpa(const struct kvm_vm *vm, uint64_t gpa, uint64_t len)
{
	uint64_t end;

	if (__builtin_add_overflow(gpa, len, &end) || end > vm->mem_size)
		return NULL;
	return vm->mem + gpa;
}

static void handle_pio(struct kvm_vcpu *vcpu)
{
	struct kvm_vm *vm = vcpu->vm;
	struct kvm_run *run = vcpu->run;
	uint32_t size = run->io.size, count = run->io.count;
	uint64_t total, end;
	uint8_t *data;
	struct kvm_dev *dev;
	int wr = run->io.direction == KVM_EXIT_IO_OUT;

	/* The data area is inside the run page; KVM fills these fields, but
	 * a bad offset would let us scribble past the mapping. */
	if (__builtin_mul_overflow((uint64_t)size, (uint64_t)count, &total) ||
	    __builtin_add_overflow(run->io.data_offset, total, &end) ||
	    end > vcpu->run_size || !size)
		return;
	data = (uint8_t *)run + run->io.data_offset;
	dev = bus_find(vm->pio, vm->nr_pio, run->io.port, size);
	if (!dev) {
		if (!wr)
			memset(data, 0xff, total);
		return;
	}
	pthread_mutex_lock(&vm->dev_lock);
	if (wr && dev->burst && size == 1)
		dev->burst(dev, data, count);
	else
		for (uint32_t i = 0; i < count; i++)
		dev->io(dev, run->io.port, data + (size_t)i * size, size, wr);
	pthread_mutex_unlock(&vm->dev_lock);
}

static void handle_mmio(struct kvm_vcpu *vcpu)
{
	struct kvm_vm *vm = vcpu->vm;
	struct kvm_run *run = vcpu->run;
	uint32_t len = run->mmio.len;
	struct kvm_dev *dev;

	if (len > sizeof(run->mmio.data))
		return;
	dev = bus_find(vm->mmio, vm->nr_mmio, run->mmio.phys_addr, len);
	if (!dev) {
		if (!run->mmio.is_write)
			memset(run->mmio.data, 0, len);
		return;
	}
	pthread_mutex_lock(&vm->dev_lock);
	dev->io(dev, run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write);
	pthread_mutex_unlock(&vm->dev_lock);
}

/* One KVM_RUN exit: devices, power-off, reset and faults. */
static void vcpu_handle_exit(struct kvm_vcpu *vcpu)
{
	struct kvm_vm *vm = vcpu->vm;

	switch (vcpu->run->exit_reason) {
	case KVM_EXIT_IO:
		handle_pio(vcpu);
		break;
	case KVM_EXIT_MMIO:
		handle_mmio(vcpu);
		break;
	case KVM_EXIT_INTR:
	case KVM_EXIT_IRQ_WINDOW_OPEN:
		break;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC; treat a halted
		 * uniprocessor as powered off. */
		kvm_vm_set_state(vm, KVM_VM_POWEROFF, 0, NULL);
		break;
	case KVM_EXIT_SHUTDOWN:
		kvm_vm_set_state(vm, KVM_VM_RESET, -1,
				 "vCPU %u: triple fault or reset", vcpu->index);
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		if (vcpu->run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			kvm_vm_set_state(vm, KVM_VM_RESET, -1, "guest reset");
		else
			kvm_vm_set_state(vm, KVM_VM_POWEROFF, 0, NULL);
		break;
	case KVM_EXIT_FAIL_ENTRY:
		kvm_vm_set_state(vm, KVM_VM_FAULT, -1,
				 "vCPU %u: VM entry failed (reason 0x%llx)",
				 vcpu->index, (unsigned long long)
				 vcpu->run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		kvm_vm_set_state(vm, KVM_VM_FAULT, -1,
				 "vCPU %u: KVM internal error %u", vcpu->index,
				 vcpu->run->internal.suberror);
		break;
	default:
		kvm_vm_set_state(vm, KVM_VM_FAULT, -1,
				 "vCPU %u: unhandled exit reason %u",
				 vcpu->index, vcpu->run->exit_reason);
		break;
	}
}

static void *vcpu_thread(void *arg)
{
	struct kvm_vcpu *vcpu = arg;
	struct kvm_vm *vm = vcpu->vm;
	const struct kvm_vcpu_hooks *h = &vm->hooks;
	sigset_t set;
	int err;

	atomic_store(&vcpu->tid, gettid());
	{
		/* The name another opvm finds the vCPU threads by (kvm-desc.h). */
		char comm[16];

		snprintf(comm, sizeof(comm), KVM_DESC_VCPU_COMM "%u", vcpu->index);
		pthread_setname_np(pthread_self(), comm);
		atomic_store(&vcpu->named, 1);
	}
	sigemptyset(&set);
	sigaddset(&set, KVM_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	if (h->thread_init) {
		err = h->thread_init(vcpu, h->arg);
		if (err) {
			kvm_vm_set_state(vm, KVM_VM_FAULT, -1,
					 "vCPU %u: sampler setup failed: %s",
					 vcpu->index, strerror(-err));
			goto out;
		}
	}
	while (!atomic_load(&vm->stopping)) {
		int ret = ioctl(vcpu->fd, KVM_RUN, 0) < 0 ? -errno : 0;

		atomic_fetch_add_explicit(&vm->exits, 1, memory_order_relaxed);
		if (h->after_run)
			h->after_run(vcpu, ret, h->arg);
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret) {
			kvm_vm_set_state(vm, KVM_VM_FAULT, -1, "vCPU %u: KVM_RUN: %s",
					 vcpu->index, strerror(-ret));
			break;
		}
		vcpu_handle_exit(vcpu);
	}
out:
	if (h->thread_exit)
		h->thread_exit(vcpu, h->arg);
	return NULL;
}

/* The host's supported CPUID, with this vCPU's APIC id and the hypervisor
 * bit. */
static int vcpu_setup_cpuid(struct kvm_vm *vm, struct kvm_vcpu *vcpu)
{
	struct kvm_cpuid2 *cpuid;
	unsigned nent = 128;
	int err = 0;

	for (;;) {
		cpuid = calloc(1, sizeof(*cpuid) + nent * sizeof(cpuid->entries[0]));
		if (!cpuid)
			return -ENOMEM;
		cpuid->nent = nent;
		if (!ioctl(vm->sys_fd, KVM_GET_SUPPORTED_CPUID, cpuid))
			break;
		err = -errno;
		free(cpuid);
		if (err != -E2BIG || nent >= 4096)
			return err;
		nent *= 2;
	}
	for (unsigned i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];

		switch (e->function) {
		case 1:
			/* Initial APIC id = vCPU index; we are a hypervisor. */
			e->ebx = (e->ebx & 0x00ffffffu) | (vcpu->index << 24);
			e->ecx |= 1u << 31;
			break;
		case 0xb:
		case 0x1f:
			e->edx = vcpu->index;
			break;
		default:
			break;
		}
	}
	err = ioctl(vcpu->fd, KVM_SET_CPUID2, cpuid) < 0 ? -errno : 0;
	free(cpuid);
	return err;
}

static int vcpu_create(struct kvm_vm *vm, unsigned i, char *why, size_t whylen)
{
	struct kvm_vcpu *v = &vm->vcpus[i];
	int sz;

	v->vm = vm;
	v->index = i;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, i);
	if (v->fd < 0) {
		errbuf_set(why, whylen, "KVM_CREATE_VCPU %u: %s", i, strerror(errno));
		return -errno;
	}
	sz = ioctl(vm->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (sz < (int)sizeof(struct kvm_run)) {
		errbuf_set(why, whylen, "KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		return -EINVAL;
	}
	v->run_size = (size_t)sz;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		errbuf_set(why, whylen, "mmap of the vCPU run page: %s", strerror(errno));
		return -errno;
	}
	{
		int caps = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_SYNC_REGS);
		unsigned want = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;

		if (caps > 0 && ((unsigned)caps & want) == want && !getenv("OPVM_KVM_NO_SYNC_REGS")) {
			v->sync_regs = 1;
			v->run->kvm_valid_regs = want;
		}
	}
	return vcpu_setup_cpuid(vm, v);
}

/* The machine without its devices (kvm-board.c adds them): the VM, its
 * interrupt controller and timer, guest RAM, the vCPUs. */
/* A zeroed VM with every fd at -1, owning cfg's channel fd. */
static struct kvm_vm *vm_alloc(const struct kvm_vm_config *cfg)
{
	struct kvm_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	vm->sys_fd = vm->vm_fd = -1;
	vm->chan_fd = cfg->channel_fd;
	vm->chan_copy_fd = -1;
	vm->serial.fd = cfg->console_fd;
	vm->exit_code = -1;
	vm->nr_vcpus = cfg->nr_vcpus;
	pthread_mutex_init(&vm->dev_lock, NULL);
	pthread_mutex_init(&vm->state_lock, NULL);
	pthread_cond_init(&vm->state_cond, NULL);
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++)
		vm->vcpus[i].fd = -1;
	if (vm->chan_fd >= 0)
		fcntl(vm->chan_fd, F_SETFL, fcntl(vm->chan_fd, F_GETFL) | O_NONBLOCK);
	return vm;
}

/* /dev/kvm, the VM and its in-kernel interrupt controller and PIT. */
static int vm_open_kvm(struct kvm_vm *vm, char *why, size_t whylen)
{
	struct kvm_pit_config pit = { .flags = 0 };
	uint64_t idmap = 0xfffbc000ull;
	int err = kvm_probe(why, whylen);

	if (err)
		return err;
	vm->sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->sys_fd < 0) {
		err = -errno;
		errbuf_set(why, whylen, "open /dev/kvm: %s", strerror(errno));
		return err;
	}
	vm->vm_fd = ioctl(vm->sys_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		err = -errno;
		errbuf_set(why, whylen, "KVM_CREATE_VM: %s", strerror(errno));
		return err;
	}
	/* Intel needs these three pages below 4 GiB for real-mode emulation;
	 * other implementations may refuse them, which is harmless. */
	ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul);
	ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap);
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		err = -errno;
		errbuf_set(why, whylen, "KVM_CREATE_IRQCHIP: %s", strerror(errno));
		return err;
	}
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0) {
		err = -errno;
		errbuf_set(why, whylen, "KVM_CREATE_PIT2: %s", strerror(errno));
		return err;
	}
	return 0;
}

/* Guest RAM: one anonymous mapping, slot 0 at guest-physical 0. */
static int vm_map_memory(struct kvm_vm *vm, uint64_t bytes, char *why, size_t whylen)
{
	struct kvm_userspace_memory_region region;
	int err;

	vm->mem_size = bytes;
	vm->mem = mmap(NULL, vm->mem_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (vm->mem == MAP_FAILED) {
		vm->mem = NULL;
		err = -errno;
		errbuf_set(why, whylen, "cannot map %llu MiB of guest memory: %s",
			    (unsigned long long)(vm->mem_size >> 20), strerror(errno));
		return err;
	}
	memset(&region, 0, sizeof(region));
	region.slot = 0;
	region.guest_phys_addr = 0;
	region.memory_size = vm->mem_size;
	region.userspace_addr = (uintptr_t)vm->mem;
	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0) {
		err = -errno;
		errbuf_set(why, whylen, "KVM_SET_USER_MEMORY_REGION: %s", strerror(errno));
		return err;
	}
	return 0;
}

struct kvm_vm *kvm_vm_create(const struct kvm_vm_config *cfg, char *why, size_t whylen)
{
	struct kvm_vm *vm;
	int err;

	if (!cfg->nr_vcpus || cfg->nr_vcpus > KVM_MAX_VCPUS ||
	    cfg->mem_bytes < (16u << 20) || cfg->mem_bytes > KVM_MAX_MEM) {
		errbuf_set(why, whylen, "need 1..%d vCPUs and 16 MiB..%llu MiB of memory",
			    KVM_MAX_VCPUS, KVM_MAX_MEM >> 20);
		if (cfg->channel_fd >= 0)
			close(cfg->channel_fd);
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&kick_once, kick_install);
	vm = vm_alloc(cfg);
	if (!vm) {
		if (cfg->channel_fd >= 0)
			close(cfg->channel_fd);
		return NULL;
	}
	err = vm_open_kvm(vm, why, whylen);
	if (!err)
		err = vm_map_memory(vm, cfg->mem_bytes, why, whylen);
	for (unsigned i = 0; !err && i < vm->nr_vcpus; i++)
		err = vcpu_create(vm, i, why, whylen);
	if (err) {
		kvm_vm_free(vm);
		errno = -err;
		return NULL;
	}
	return vm;
}

/* The channel's copy (bounded) for an attaching process, which needs the
 * processes and mappings the guest described from its first record on:
 * opened before the vCPUs run.  Also makes the descriptor's path. */
static void vm_chan_copy_open(struct kvm_vm *vm)
{
	char chan[300];

	if (!vm->desc_path[0] &&
	    kvm_desc_path(getpid(), 1, vm->desc_path, sizeof(vm->desc_path)))
		return;
	if (snprintf(chan, sizeof(chan), "%s.chan", vm->desc_path) < (int)sizeof(chan))
		vm->chan_copy_fd = open(chan, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND |
					O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* Writes the runtime descriptor for `opvm attach --pid` (kvm-desc.h), once
 * the vCPU threads it promises can be found.  Best effort: a VMM that
 * cannot publish still runs; the attach says so. */
static void vm_publish(struct kvm_vm *vm)
{
	struct kvm_desc *d = &vm->desc;

	if (!vm->desc_path[0])
		return;
	d->pid = getpid();
	d->nr_vcpus = vm->nr_vcpus;
	d->nr_ram = 1;
	d->ram[0].gpa = 0;
	d->ram[0].len = vm->mem_size;
	d->ram[0].hva = (uint64_t)(uintptr_t)vm->mem;
	if (kvm_desc_write(vm->desc_path, d))
		return;
	vm->published = 1;
}

void kvm_vm_publish_switch(struct kvm_vm *vm, uint64_t switch_pa, uint32_t stride,
			   uint32_t entries, uint32_t nr)
{
	vm->desc.switch_pa = switch_pa;
	vm->desc.switch_stride = stride;
	vm->desc.switch_entries = entries;
	vm->desc.switch_nr = nr;
	if (vm->published)
		kvm_desc_write(vm->desc_path, &vm->desc);
}

/*
 * Waits (at most 5 s) until every started vCPU thread carries its name:
 * `opvm attach --pid` finds the vCPU threads by name as soon as the
 * descriptor exists, and published before them (kvm-perf-python once
 * attached in that gap: "has not all of its 1 vCPU threads running").
 */
static void vcpus_named_wait(struct kvm_vm *vm)
{
	for (int ms = 0; ms < 5000; ms++) {
		unsigned n = 0;

		for (unsigned i = 0; i < vm->nr_vcpus; i++)
			n += !vm->vcpus[i].started || atomic_load(&vm->vcpus[i].named);
		if (n == vm->nr_vcpus)
			return;
		usleep(1000);
	}
}

int kvm_vm_start(struct kvm_vm *vm, const struct kvm_vcpu_hooks *hooks)
{
	sigset_t set, old;
	int err = 0;

	if (vm->state != KVM_VM_CREATED)
		return -EALREADY;
	if (hooks)
		vm->hooks = *hooks;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (!v->has_boot_state)
			continue;
		if (ioctl(v->fd, KVM_SET_SREGS, &v->boot_sregs) < 0 ||
		    ioctl(v->fd, KVM_SET_REGS, &v->boot_regs) < 0) {
			snprintf(vm->error, sizeof(vm->error), "vCPU %u: setting boot "
				 "registers: %s", i, strerror(errno));
			return -errno;
		}
	}
	vm->state = KVM_VM_RUNNING;
	vm_chan_copy_open(vm);
	/* vCPU threads inherit a mask with the kick blocked until they are
	 * ready to handle it (they unblock it themselves). */
	sigemptyset(&set);
	sigaddset(&set, KVM_KICK_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		err = -pthread_create(&v->thread, NULL, vcpu_thread, v);
		if (err) {
			kvm_vm_set_state(vm, KVM_VM_FAULT, -1, "cannot start vCPU thread: %s",
					 strerror(-err));
			break;
		}
		v->started = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	vcpus_named_wait(vm);
	vm_publish(vm);		/* the descriptor says the vCPUs can be found */
	return err;
}

void kvm_vm_stop(struct kvm_vm *vm)
{
	if (!vm)
		return;
	kvm_vm_set_state(vm, KVM_VM_STOPPED, -1, NULL);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (!v->started)
			continue;
		pthread_join(v->thread, NULL);
		v->started = 0;
	}
}

enum kvm_vm_state kvm_vm_wait(struct kvm_vm *vm, int timeout_ms)
{
	struct timespec ts;
	enum kvm_vm_state st;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms > 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&vm->state_lock);
	while (vm->state == KVM_VM_RUNNING) {
		if (timeout_ms < 0)
			pthread_cond_wait(&vm->state_cond, &vm->state_lock);
		else if (!timeout_ms ||
			 pthread_cond_timedwait(&vm->state_cond, &vm->state_lock, &ts))
			break;
	}
	st = vm->state;
	pthread_mutex_unlock(&vm->state_lock);
	return st;
}

enum kvm_vm_state kvm_vm_state(const struct kvm_vm *vm)
{
	enum kvm_vm_state st;

	pthread_mutex_lock((pthread_mutex_t *)&vm->state_lock);
	st = vm->state;
	pthread_mutex_unlock((pthread_mutex_t *)&vm->state_lock);
	return st;
}

int kvm_vm_exit_code(const struct kvm_vm *vm)
{
	return vm->exit_code;
}

const char *kvm_vm_error(const struct kvm_vm *vm)
{
	return vm->error[0] ? vm->error : NULL;
}

unsigned kvm_vm_nr_vcpus(const struct kvm_vm *vm)
{
	return vm->nr_vcpus;
}

uint64_t kvm_vm_mem_bytes(const struct kvm_vm *vm)
{
	return vm->mem_size;
}

uint64_t kvm_vm_exits(const struct kvm_vm *vm)
{
	return atomic_load(&((struct kvm_vm *)vm)->exits);
}

uint64_t kvm_vm_chan_bytes(const struct kvm_vm *vm)
{
	return atomic_load(&((struct kvm_vm *)vm)->chan_bytes);
}

uint64_t kvm_vm_chan_dropped(const struct kvm_vm *vm)
{
	return atomic_load(&((struct kvm_vm *)vm)->chan_dropped);
}

void kvm_vm_free(struct kvm_vm *vm)
{
	if (!vm)
		return;
	kvm_vm_stop(vm);
	if (vm->desc_path[0]) {	/* the channel's copy, the descriptor */
		char chan[300];

		unlink(vm->desc_path);
		if (snprintf(chan, sizeof(chan), "%s.chan", vm->desc_path) < (int)sizeof(chan))
			unlink(chan);
	}
	if (vm->chan_copy_fd >= 0)
		close(vm->chan_copy_fd);
	kvm_virtio_con_free(vm->vcon);
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (v->run)
			munmap(v->run, v->run_size);
		if (v->fd >= 0)
			close(v->fd);
	}
	if (vm->mem)
		munmap(vm->mem, vm->mem_size);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->sys_fd >= 0)
		close(vm->sys_fd);
	if (vm->chan_fd >= 0)
		close(vm->chan_fd);
	pthread_cond_destroy(&vm->state_cond);
	pthread_mutex_destroy(&vm->state_lock);
	pthread_mutex_destroy(&vm->dev_lock);
	free(vm);
}

unsigned kvm_vcpu_index(const struct kvm_vcpu *vcpu)
{
	return vcpu->index;
}

struct kvm_vm *kvm_vcpu_vm(const struct kvm_vcpu *vcpu)
{
	return vcpu->vm;
}

int kvm_vcpu_tid(const struct kvm_vcpu *vcpu)
{
	return atomic_load(&((struct kvm_vcpu *)vcpu)->tid);
}

void kvm_vcpu_set_priv(struct kvm_vcpu *vcpu, void *priv)
{
	vcpu->priv = priv;
}

void *kvm_vcpu_priv(const struct kvm_vcpu *vcpu)
{
	return vcpu->priv;
}

int kvm_vcpu_sample_regs(struct kvm_vcpu *vcpu, struct kvm_sample_regs *out)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	if (vcpu->sync_regs) {
		out->rip = vcpu->run->s.regs.regs.rip;
		out->cr3 = vcpu->run->s.regs.sregs.cr3;
		out->cpl = vcpu->run->s.regs.sregs.cs.dpl;
		return 0;
	}
	if (ioctl(vcpu->fd, KVM_GET_REGS, &regs) < 0 ||
	    ioctl(vcpu->fd, KVM_GET_SREGS, &sregs) < 0)
		return -errno;
	out->rip = regs.rip;
	out->cr3 = sregs.cr3;
	out->cpl = sregs.cs.dpl;
	return 0;
}
