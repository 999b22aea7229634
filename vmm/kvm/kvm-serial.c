// SPDX-License-Identifier: MIT
/*
 * 8250/16550 UART at 0x3f8, output only: enough for Linux's earlyprintk and
 * serial console (both poll LSR, so no interrupts are needed for output)
 * and for the probe in drivers/tty/serial/8250 (scratch register, loopback
 * MSR).  Reads of RBR return 0: the guest gets no input.
 */
#include <errno.h>
#include <unistd.h>

#include "vmm/kvm/kvm-priv.h"

#define UART_LSR_THRE	0x20
#define UART_LSR_TEMT	0x40
#define UART_LCR_DLAB	0x80
#define UART_MCR_LOOP	0x10

static void serial_out(struct kvm_serial *s, uint8_t c)
{
	if (s->fd < 0)
		return;
	while (write(s->fd, &c, 1) < 0 && errno == EINTR)
		;
}

static uint8_t serial_msr(const struct kvm_serial *s)
{
	uint8_t m = s->mcr;

	if (!(m & UART_MCR_LOOP))
		return 0xb0;			/* DCD, DSR, CTS */
	/* Loopback: modem outputs appear on the status inputs. */
	return (uint8_t)(((m & 0x02) << 3) | ((m & 0x01) << 5) |
			 ((m & 0x04) << 4) | ((m & 0x08) << 4));
}

void kvm_serial_io(struct kvm_dev *dev, uint64_t addr, void *data, uint32_t len,
		   int is_write)
{
	struct kvm_serial *s = dev->priv;
	unsigned reg = (unsigned)(addr - dev->base);
	uint8_t *v = data;
	int dlab = !!(s->lcr & UART_LCR_DLAB);

	if (len != 1) {
		if (!is_write)
			for (uint32_t i = 0; i < len; i++)
				v[i] = 0xff;
		return;
	}
	if (is_write) {
		switch (reg) {
		case 0:
			if (dlab)
				s->dll = *v;
			else if (!(s->mcr & UART_MCR_LOOP))
				serial_out(s, *v);
			break;
		case 1:
			if (dlab)
				s->dlm = *v;
			else
				s->ier = *v & 0x0f;
			break;
		case 3:
			s->lcr = *v;
			break;
		case 4:
			s->mcr = *v & 0x1f;
			break;
		case 7:
			s->scr = *v;
			break;
		default:			/* FCR, LSR, MSR: ignored */
			break;
		}
		return;
	}
	switch (reg) {
	case 0:
		*v = dlab ? s->dll : 0;
		break;
	case 1:
		*v = dlab ? s->dlm : s->ier;
		break;
	case 2:
		*v = 0xc1;			/* FIFOs on, no interrupt pending */
		break;
	case 3:
		*v = s->lcr;
		break;
	case 4:
		*v = s->mcr;
		break;
	case 5:
		*v = UART_LSR_THRE | UART_LSR_TEMT;
		break;
	case 6:
		*v = serial_msr(s);
		break;
	default:
		*v = s->scr;
		break;
	}
}
