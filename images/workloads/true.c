/* SPDX-License-Identifier: MIT */
/* opvm-true: the smallest static program forker can exec. */
int main(void)
{
	return 0;
}
