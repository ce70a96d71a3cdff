; Inno Setup 6 script: the Windows installer (per user, or all users) for the one-folder build in dist\nexttoken\.
;
;   python packaging\build.py
;   ISCC.exe /DAppVersion=<python packaging\build.py --print-version> [/DVariant=classroom] packaging\nexttoken.iss
;
; AppVersion is required: the one version source is pyproject.toml (build.py --print-version reads it).
; Output: dist\nexttoken[-classroom]-<version>-windows-x64-setup.exe. By default it installs for the
; current user (%LOCALAPPDATA%\Programs\nexttoken, no administrator rights); the first page, or /ALLUSERS
; on the command line, installs for all users under Program Files instead (lab machines often block
; per-user program folders). It adds a Start-menu shortcut and, if ticked, a desktop shortcut, and
; registers an uninstaller (Settings > Apps, or the Start menu). An upgrade first deletes the old
; {app}\_internal, so no file of the previous version is left beside the new one.
;
; A school's IT: silent install for every user (elevated):
;   nexttoken-<version>-windows-x64-setup.exe /VERYSILENT /SUPPRESSMSGBOXES /NORESTART /ALLUSERS
; installs into C:\Program Files\nexttoken, with defaults.conf beside nexttoken.exe: every key commented
; out (the classroom variant: model = gpt2). Edit it there to set, for every user, the model a new
; user's first window opens, projector mode and whether hub downloads are offered (app/site_defaults.py).
; It is installed only when none is there, and kept on upgrades and on uninstall, as a Debian conffile is.
; Paths below are relative to this file's folder. The GitHub workflow .github/workflows/installers.yml
; runs this; it has not been run on a Windows machine by hand.

#ifndef AppVersion
  #error Pass the version: ISCC /DAppVersion=<python packaging\build.py --print-version> packaging\nexttoken.iss
#endif
#ifdef Variant
  #if Variant == "classroom"
    #define Stem "nexttoken-classroom"
  #else
    #define Stem "nexttoken"
  #endif
#else
  #define Stem "nexttoken"
#endif

[Setup]
AppId={{DAFDAC2B-9968-4629-BE7D-D65713AEF3CB}
AppName=nexttoken
AppVersion={#AppVersion}
AppVerName=nexttoken {#AppVersion}
AppPublisher=nexttoken maintainers
; Per user by default, no elevation: {autopf} is then %LOCALAPPDATA%\Programs, {autoprograms} the user's
; Start menu. "dialog commandline": the user may choose all users (elevating) on the first page or with /ALLUSERS.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog commandline
; Qt 6's floor: Windows 10 1809.
MinVersion=10.0.17763
DefaultDirName={autopf}\nexttoken
DefaultGroupName=nexttoken
DisableProgramGroupPage=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\dist
OutputBaseFilename={#Stem}-{#AppVersion}-windows-x64-setup
SetupIconFile=..\resources\icons\nexttoken.ico
UninstallDisplayIcon={app}\nexttoken.exe
UninstallDisplayName=nexttoken
; lzma2 over ~870 MB: "normal" packs in minutes where "max" takes much longer for a few % less.
Compression=lzma2/normal
SolidCompression=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An upgrade replaces the bundle whole: files the new version no longer has must not stay behind.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "..\dist\nexttoken\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs
; The machine's defaults (the bundle's own file as the template): the administrator's edits stay.
Source: "..\dist\nexttoken\_internal\defaults.conf"; DestDir: "{app}"; Flags: onlyifdoesntexist uninsneveruninstall

[Icons]
Name: "{autoprograms}\nexttoken"; Filename: "{app}\nexttoken.exe"; Comment: "Watch a GPT-2 language model produce its next token"
Name: "{autodesktop}\nexttoken"; Filename: "{app}\nexttoken.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\nexttoken.exe"; Description: "{cm:LaunchProgram,nexttoken}"; Flags: nowait postinstall skipifsilent

; The app keeps its settings and log in the user's folders (%LOCALAPPDATA%\nexttoken), never in {app}:
; the uninstaller removes everything it installed and leaves those.
