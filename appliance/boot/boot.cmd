# Harbor Gateway appliance: U-Boot picks the root slot to boot (compiled to boot.scr by the build).
#
# Two files on this partition hold the choice, written by the running system (boot-state.mjs):
#   harbor-slot.env  HARBOR_SLOT=A|B      the committed slot; written only when a trial is confirmed
#   harbor-try.env   HARBOR_TRY=A|B       a slot on trial after an update, and
#                    HARBOR_TRY_LEFT=N    how many boots it may still try (the installer sets 1)
# A trial boot spends one attempt before the kernel starts, so a trial that hangs, panics, loses
# power or is marked bad comes back to the committed slot on the next boot, without anyone's help:
# the decision of a Raspberry Pi's tryboot, kept by U-Boot on every board. A missing or damaged
# file means no trial (harbor-try.env) or slot A (harbor-slot.env), never an unbootable card.

setenv HARBOR_SLOT A
setenv HARBOR_TRY
setenv HARBOR_TRY_LEFT 0
if load ${devtype} ${devnum}:1 ${scriptaddr} harbor-slot.env; then
  env import -t ${scriptaddr} ${filesize} HARBOR_SLOT
fi
if load ${devtype} ${devnum}:1 ${scriptaddr} harbor-try.env; then
  env import -t ${scriptaddr} ${filesize} HARBOR_TRY HARBOR_TRY_LEFT
fi

setenv harbor_boot ${HARBOR_SLOT}
setenv harbor_trial 0
if test "${HARBOR_TRY}" = "A" || test "${HARBOR_TRY}" = "B"; then
  if test ${HARBOR_TRY_LEFT} -gt 0; then
    setexpr HARBOR_TRY_LEFT ${HARBOR_TRY_LEFT} - 1
    env export -t ${scriptaddr} HARBOR_TRY HARBOR_TRY_LEFT
    fatwrite ${devtype} ${devnum}:1 ${scriptaddr} harbor-try.env ${filesize}
    setenv harbor_boot ${HARBOR_TRY}
    setenv harbor_trial 1
  fi
fi
if test "${harbor_boot}" != "B"; then
  setenv harbor_boot A
fi
if test "${harbor_boot}" = "B"; then
  setenv harbor_part 3
else
  setenv harbor_part 2
fi
echo "Harbor Gateway: booting slot ${harbor_boot} (partition ${harbor_part}, trial ${harbor_trial})"

part uuid ${devtype} ${devnum}:${harbor_part} harbor_root
if test "${board}" = "qemu-arm"; then
  setenv harbor_console "console=ttyAMA0"
else
  setenv harbor_console "console=ttyS1,115200 console=tty0"
fi
setenv bootargs "root=PARTUUID=${harbor_root} rootfstype=ext4 rootwait fsck.repair=yes panic=10 ${harbor_console} rauc.slot=${harbor_boot} harbor.trial=${harbor_trial}"

# Debian's arm64 kernel is gzip-compressed; booti unpacks it into this scratch area.
if test -z "${kernel_comp_addr_r}"; then
  setexpr kernel_comp_addr_r ${ramdisk_addr_r} + 0x8000000
fi
load ${devtype} ${devnum}:${harbor_part} ${kernel_addr_r} /boot/vmlinuz
setenv kernel_comp_size ${filesize}
load ${devtype} ${devnum}:${harbor_part} ${ramdisk_addr_r} /boot/initrd.img
booti ${kernel_addr_r} ${ramdisk_addr_r}:${filesize} ${fdt_addr}

# The slot's kernel did not start: count it as a spent attempt and let the next boot decide.
echo "Harbor Gateway: slot ${harbor_boot} has no bootable kernel; restarting"
sleep 5
reset
