/*
 * Hadoop's local file system ("file://"), with one change: permissions are set through java.nio.
 *
 * Without Hadoop's native library (pyspark does not ship it), RawLocalFileSystem.setPermission starts a
 * `chmod` process for every file and folder it creates: about 26 processes per Parquet partition file that
 * Spark writes (the file, its .crc, the task and job folders). Writing many small partitions on a local file
 * system is then bound by process start-up. The permissions set here are the same bits (rwx for owner,
 * group and others); modes with setuid/setgid/sticky bits, and file systems without POSIX permissions, go
 * to Hadoop's own code.
 *
 * Built by scripts/build_localfs_jar.sh into ctcalc-localfs.jar; ctcalc_spark/localfs/__init__.py says when
 * a session uses it.
 */
package ctcalc.localfs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/** LocalFileSystem (checksummed, as Hadoop's default for file://) over {@link Raw}. */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** RawLocalFileSystem whose setPermission does not start a process. */
  public static class Raw extends RawLocalFileSystem {
    /** Bit i of a Unix mode (others-execute = bit 0 ... owner-read = bit 8). */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      if ((mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          set.add(BITS[i]);
        }
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
      } catch (UnsupportedOperationException e) {
        super.setPermission(p, permission);
      }
    }
  }
}
