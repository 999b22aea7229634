// SPDX-License-Identifier: MIT
/*
 * libvirt lookup: finding the opvm channel's socket in domain XML, including
 * XML a hostile or odd configuration could produce.  (The live daemon is
 * exercised by tests/integration/libvirt-*.sh.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vmm/libvirt/virt.h"

static const char dom_xml[] =
	"<domain type='qemu' id='3'>\n  <name>web01</name>\n  <devices>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-3-web01/org.qemu.guest_agent.0'/>\n"
	"      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>\n"
	"    </channel>\n"
	"    <channel type='pty'>\n"
	"      <source path='/dev/pts/3'/>\n"
	"      <target type='virtio' name='org.opvm.0'/>\n"
	"    </channel>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/run/opvm/web01.sock'/>\n"
	"      <target type='virtio' name='org.opvm.0' state='connected'/>\n"
	"      <alias name='channel1'/>\n"
	"    </channel>\n  </devices>\n</domain>\n";

static void test_channel_path(void **state)
{
	char path[256];

	(void)state;
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.opvm.0", path, sizeof(path)), 0);
	assert_string_equal(path, "/run/opvm/web01.sock");
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.qemu.guest_agent.0", path,
					       sizeof(path)), 0);
	assert_non_null(strstr(path, "guest_agent"));
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.other", path, sizeof(path)), -ENOENT);
	assert_int_equal(virt_xml_channel_path(dom_xml, "org.opvm.0", path, 8), -ENAMETOOLONG);
}

static void test_channel_path_odd(void **state)
{
	char path[64];
	static const char *none[] = {
		"",
		"<channel type='unix'>",
		"<channel type='unix'><source path='relative'/><target name='org.opvm.0'/></channel>",
		"<channel type='unix'><source path='/x/><target name='org.opvm.0'/></channel>",
		"<channelx type='unix'><source path='/x'/><target name='org.opvm.0'/></channelx>",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		assert_int_equal(virt_xml_channel_path(none[i], "org.opvm.0", path, sizeof(path)),
				 -ENOENT);
	assert_int_equal(virt_xml_channel_path(
		"<channel type=\"unix\"><source mode=\"bind\" path=\"/a/b\"/>"
		"<target type=\"virtio\" name=\"org.opvm.0\"/></channel>",
		"org.opvm.0", path, sizeof(path)), 0);
	assert_string_equal(path, "/a/b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channel_path),
		cmocka_unit_test(test_channel_path_odd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
